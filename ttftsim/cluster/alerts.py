"""Prometheus alert rules evaluated on the run (seed claim 12), and what they cost and catch.

Every `evaluation_interval_s` (from time 0) each rule's metric is read from the scrapes (scrapes.py), the
pods' bandwidth (bandwidth.py) or the cluster's state, and compared with its threshold. The state machine
is Prometheus' (rules/alerting.go, `AlertingRule.Eval`): a rule whose expression holds and was inactive
becomes pending with activeAt = now; a pending rule fires once now - activeAt >= `for_s` (at once without
`for`); a rule whose expression does not hold (NaN: no data, as an empty PromQL result) becomes inactive,
and a firing one resolves. A `scale_out` rule stands for an Alertmanager webhook: each firing adds one
replica `group_wait_s` later, up to the section's max_replicas. Not modelled: keep_firing_for,
Alertmanager's grouping of several alerts, repeat_interval re-notifications, inhibition.

`alert_figures` judges the firings against the SLO-violation windows the run computes (a window is
violating when its requests' TTFT P99, by arrival, misses the target: ClusterReport): a page is false when
it never fires during a violating window or the one after (detection lags by up to `for_s` + the
evaluation interval + the rate window); a violating window is missed when no page fires during it or the
one after.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import simpy

from ttftsim.cluster.bandwidth import BandwidthMeter
from ttftsim.cluster.lifecycle import PodLifecycle
from ttftsim.cluster.scrapes import Prometheus
from ttftsim.config.cluster_control import Alerting, AlertRule


@dataclass(frozen=True)
class Firing:
    """One firing of a rule: from when it fired to when it resolved (the end of the run if it did not)."""

    alert: str
    severity: str
    start_s: float
    end_s: float


@dataclass
class _RuleState:
    active_s: float = math.nan  # activeAt of a pending or firing alert; NaN when inactive
    fired_s: float = math.nan  # when it fired; NaN when not firing


def holds(rule: AlertRule, value: float) -> bool:
    """`metric op threshold`; a NaN value (no data) never holds."""
    if math.isnan(value):
        return False
    return value > rule.threshold if rule.op == ">" else value < rule.threshold


class AlertEvaluator:
    """Evaluates the rules; `firings` holds the ended firings (close() ends those still firing) and
    `transitions` one row per state change (time_s, alert, state, value)."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: Alerting,
        lifecycle: PodLifecycle,
        prometheus: Prometheus,
        meter: BandwidthMeter,
        gateway_queue: Callable[[], int],
    ) -> None:
        self.env, self.spec, self.lifecycle = env, spec, lifecycle
        self.prometheus, self.meter, self.gateway_queue = prometheus, meter, gateway_queue
        self.states = {rule.name: _RuleState() for rule in spec.rules}
        self.firings: list[Firing] = []
        self.transitions: list[dict[str, Any]] = []
        self.scale_outs = 0

    def value(self, rule: AlertRule) -> float:
        """The rule's metric now."""
        metric = rule.metric
        if metric == "ttft_p99_s":
            return self.prometheus.ttft_quantile(0.99, self.spec.rate_window_s)
        if metric in ("num_requests_waiting", "kv_cache_usage_perc"):
            return self.prometheus.gauge_mean(metric)
        serving = self.lifecycle.serving()
        if metric == "gpu_bandwidth_utilisation":
            return self.meter.mean(serving, self.env.now)
        if metric == "gateway_queue":
            return float(self.gateway_queue())
        return float(sum(1 for p in serving if p.state == "pending"))

    def run(self) -> Generator[simpy.Event, Any, None]:
        while True:
            for rule in self.spec.rules:
                self.evaluate(rule, self.value(rule))
            yield self.env.timeout(self.spec.evaluation_interval_s)

    def evaluate(self, rule: AlertRule, value: float) -> None:
        """One evaluation of one rule at the current time."""
        state, now = self.states[rule.name], self.env.now
        if not holds(rule, value):
            if not math.isnan(state.fired_s):
                self.firings.append(Firing(rule.name, rule.severity, state.fired_s, now))
            if not math.isnan(state.active_s):
                self.transitions.append({"time_s": now, "alert": rule.name, "state": "inactive", "value": value})
            state.active_s = state.fired_s = math.nan
            return
        if math.isnan(state.active_s):
            state.active_s = now
            self.transitions.append({"time_s": now, "alert": rule.name, "state": "pending", "value": value})
        if math.isnan(state.fired_s) and now - state.active_s >= rule.for_s:
            state.fired_s = now
            self.transitions.append({"time_s": now, "alert": rule.name, "state": "firing", "value": value})
            if rule.action == "scale_out":
                self.env.process(self._scale_out())

    def _scale_out(self) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(self.spec.group_wait_s)
        bound = self.spec.max_replicas
        if bound is not None and self.lifecycle.desired < bound:
            self.scale_outs += 1
            self.lifecycle.scale_to(self.lifecycle.desired + 1)

    def close(self) -> None:
        """At the end of the run: alerts still firing end now."""
        for rule in self.spec.rules:
            state = self.states[rule.name]
            if not math.isnan(state.fired_s):
                self.firings.append(Firing(rule.name, rule.severity, state.fired_s, self.env.now))
                state.fired_s = math.nan


@dataclass(frozen=True)
class AlertFigures:
    """What the rules did over a run: firings and minutes per severity, false pages (no violation near
    them), SLO-violation minutes no page caught (None without a TTFT P99 target), replicas added."""

    firings: int
    pages: int
    page_minutes: float
    tickets: int
    ticket_minutes: float
    false_pages: int
    slo_violation_minutes: float | None
    missed_slo_minutes: float | None
    scale_outs: int


def alert_figures(
    firings: Sequence[Firing], violating: set[int] | None, window_s: float, scale_outs: int
) -> AlertFigures:
    """`violating`: indices of the SLO windows (floor(arrival / window_s)) whose TTFT P99 missed the target."""
    pages = [f for f in firings if f.severity == "page"]
    tickets = [f for f in firings if f.severity == "ticket"]

    def windows(firing: Firing) -> set[int]:
        """The windows a firing overlaps, and the one before each (a page may lag its window)."""
        first, last = math.floor(firing.start_s / window_s), math.ceil(firing.end_s / window_s) - 1
        return {w - lag for w in range(first, max(first, last) + 1) for lag in (0, 1)}

    false_pages = sum(1 for f in pages if violating is not None and not windows(f) & violating)
    caught = set().union(*(windows(f) for f in pages)) if pages else set()
    return AlertFigures(
        firings=len(firings),
        pages=len(pages),
        page_minutes=sum(f.end_s - f.start_s for f in pages) / 60.0,
        tickets=len(tickets),
        ticket_minutes=sum(f.end_s - f.start_s for f in tickets) / 60.0,
        false_pages=false_pages,
        slo_violation_minutes=None if violating is None else len(violating) * window_s / 60.0,
        missed_slo_minutes=None if violating is None else len(violating - caught) * window_s / 60.0,
        scale_outs=scale_outs,
    )
