"""Cluster sections that watch the simulated metrics and act on them: a custom controller (seed claim 11)
and Prometheus-style alert rules with severity tiers (seed claim 12).

A controller is a small strategy picked by `type` (a discriminated union, as the routers are). Alert rules
follow Prometheus' alerting rules (prometheus/prometheus rules/alerting.go, `AlertingRule.Eval`): an
expression compared with a threshold at every evaluation, pending until it has held for `for_s`, then
firing until it no longer holds; `severity` is the label Alertmanager routes on (page a human, or open a
ticket), and `scale_out` stands for an Alertmanager webhook that adds a replica (after Alertmanager's
group_wait, 30 s by default).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from ttftsim.config.base import StrictModel


class ClosedLoopController(StrictModel):
    """Seed claim 11's rule, checked every `period_s` while no earlier action is still settling: when the
    scraped TTFT P99 is above `ttft_p99_s` and the serving pods' mean GPU memory-bandwidth utilisation is
    below `bandwidth_utilisation`, add a replica; when P99 is above and utilisation is not below, move the
    pod on the busiest node to a less loaded node (start a new pod away from that node, then drain the
    old one once the new one is ready)."""

    type: Literal["closed_loop"] = Field(description="P99 and memory-bandwidth utilisation: add or move a pod")
    period_s: float = Field(default=15.0, gt=0, description="How often the controller reads its signals, seconds")
    ttft_p99_s: float = Field(default=0.5, gt=0, description="TTFT P99 above which it acts, seconds")
    bandwidth_utilisation: float = Field(
        default=0.6, gt=0, le=1, description="Mean GPU memory-bandwidth utilisation below which it adds a replica"
    )
    max_replicas: int = Field(ge=1, description="It never adds a serving replica beyond this")
    cooldown_s: float = Field(
        default=60.0, ge=0, description="After an action, wait this long (and for the new pod to be ready)"
    )
    rate_window_s: float = Field(default=60.0, gt=0, description="rate() window of the TTFT P99 query, seconds")


class TtftScaleOutController(StrictModel):
    """Adds a replica whenever the scraped TTFT P99 is above `ttft_p99_s` (no bandwidth signal, never
    moves a pod): the baseline a closed loop is compared with."""

    type: Literal["ttft_p99"] = Field(description="Add a replica while TTFT P99 is above the threshold")
    period_s: float = Field(default=15.0, gt=0, description="How often the controller reads its signals, seconds")
    ttft_p99_s: float = Field(default=0.5, gt=0, description="TTFT P99 above which it adds a replica, seconds")
    max_replicas: int = Field(ge=1, description="It never adds a serving replica beyond this")
    cooldown_s: float = Field(
        default=60.0, ge=0, description="After an action, wait this long (and for the new pod to be ready)"
    )
    rate_window_s: float = Field(default=60.0, gt=0, description="rate() window of the TTFT P99 query, seconds")


Controller = Annotated[ClosedLoopController | TtftScaleOutController, Field(discriminator="type")]

AlertMetric = Literal[
    "ttft_p99_s",
    "num_requests_waiting",
    "kv_cache_usage_perc",
    "gpu_bandwidth_utilisation",
    "gateway_queue",
    "pods_pending",
]


class AlertRule(StrictModel):
    """One alerting rule: `metric op threshold`, held for `for_s` before it fires."""

    name: str = Field(min_length=1, description="Alert name (alertname)")
    metric: AlertMetric = Field(
        description="ttft_p99_s: histogram_quantile(0.99) of the TTFT histogram over rate_window_s; "
        "num_requests_waiting, kv_cache_usage_perc, gpu_bandwidth_utilisation: averaged over ready serving pods; "
        "gateway_queue: requests held at the gateway; pods_pending: serving pods without a node"
    )
    op: Literal[">", "<"] = Field(default=">", description="Comparison of the metric with the threshold")
    threshold: float = Field(description="Threshold, in the metric's unit")
    for_s: float = Field(default=0.0, ge=0, description="The `for:` duration: pending this long before firing")
    severity: Literal["page", "ticket"] = Field(description="page: a human is paged; ticket: a non-urgent tier")
    action: Literal["none", "scale_out"] = Field(
        default="none", description="scale_out: a webhook adds a replica each time the alert fires"
    )


class Alerting(StrictModel):
    """Alert rules evaluated on the run's scraped metrics every `evaluation_interval_s`."""

    rules: list[AlertRule] = Field(min_length=1, description="The rules")
    evaluation_interval_s: float = Field(
        default=60.0, gt=0, description="Rule evaluation interval (Prometheus' global default: 1 m)"
    )
    rate_window_s: float = Field(default=60.0, gt=0, description="rate() window of the TTFT P99 expression")
    group_wait_s: float = Field(
        default=30.0, ge=0, description="Alertmanager group_wait: a firing alert's notification waits this long"
    )
    max_replicas: int | None = Field(
        default=None, ge=1, description="Replicas a scale_out action never goes beyond (required with scale_out)"
    )

    @model_validator(mode="after")
    def _scale_out_bound(self) -> Alerting:
        names = [rule.name for rule in self.rules]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise ValueError(f"rules: alert names must be unique, {duplicated} repeat")
        if self.max_replicas is None and any(rule.action == "scale_out" for rule in self.rules):
            raise ValueError("max_replicas: a rule with action scale_out needs a replica bound")
        return self
