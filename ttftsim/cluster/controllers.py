"""Custom controllers (config.cluster_control): a loop that reads simulated signals every period and acts
on the serving pods (seed claim 11). The decision is a pure function of the signals (`closed_loop_step`,
`ttft_step`); the loop reads the signals (TTFT P99 from Prometheus' scrapes, the pods' GPU memory-bandwidth
utilisation from bandwidth.py over the last period), acts, and waits for what it started to settle.

Actions: `add` raises the replica count by one (the ReplicaSet starts a pod, cold); `move` picks the
node with the most busy serving pods among nodes holding two or more (ties: more pods, then the lowest
index), starts a new pod that may not land there, and at the first period after the new pod is ready
drains the newest pod on that node, as a descheduler with a surge would (kube-scheduler's scores then
place the new pod on the least allocated node that passes the filters; none: it waits for a node).
While an action's new pod is not ready, or for `cooldown_s` after it was taken, the controller only
observes. Not modelled: a controller's own API latency, leader election.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Generator
from typing import Any, Literal

import simpy

from ttftsim.cluster.bandwidth import BandwidthMeter
from ttftsim.cluster.lifecycle import PodLifecycle
from ttftsim.cluster.pod import Pod
from ttftsim.cluster.scrapes import Prometheus
from ttftsim.config.cluster_control import ClosedLoopController, Controller, TtftScaleOutController

Action = Literal["add", "move", "hold"]


def closed_loop_step(spec: ClosedLoopController, ttft_p99_s: float, utilisation: float) -> Action:
    """Claim 11: P99 above the threshold and utilisation below its threshold: add a replica; P99 above
    and utilisation not below (or unknown): move a pod; otherwise (P99 at or below, or no data) hold."""
    if math.isnan(ttft_p99_s) or ttft_p99_s <= spec.ttft_p99_s:
        return "hold"
    if not math.isnan(utilisation) and utilisation < spec.bandwidth_utilisation:
        return "add"
    return "move"


def ttft_step(spec: TtftScaleOutController, ttft_p99_s: float) -> Action:
    return "add" if not math.isnan(ttft_p99_s) and ttft_p99_s > spec.ttft_p99_s else "hold"


def busiest_pod(ready: list[Pod]) -> Pod | None:
    """The pod to move: on the node with the most busy serving pods (requests in flight), the newest
    there; None when no node has two pods (moving a pod alone on its node frees nothing)."""
    busy = Counter(p.node.index for p in ready if p.node is not None and p.outstanding > 0)
    crowded = Counter(p.node.index for p in ready if p.node is not None)
    candidates = [n for n, count in crowded.items() if count > 1]
    if not candidates:
        return None
    node = min(candidates, key=lambda n: (-busy[n], -crowded[n], n))
    return max((p for p in ready if p.node is not None and p.node.index == node), key=lambda p: p.index)


class ControllerLoop:
    """Runs one controller. `rows`: one per period (time_s, ttft_p99_s, bandwidth_utilisation, replicas,
    action: add / move / hold / settling / at max_replicas / nothing to move)."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: Controller,
        lifecycle: PodLifecycle,
        prometheus: Prometheus,
        meter: BandwidthMeter,
    ) -> None:
        self.env, self.spec, self.lifecycle, self.prometheus, self.meter = env, spec, lifecycle, prometheus, meter
        self.rows: list[dict[str, Any]] = []
        self.started: Pod | None = None  # the pod the last action started
        self.replaced: Pod | None = None  # the pod a move drains once `started` is ready
        self.acted_s = -math.inf

    def run(self) -> Generator[simpy.Event, Any, None]:
        spec = self.spec
        while True:
            yield self.env.timeout(spec.period_s)
            now = self.env.now
            ready = [p for p in self.lifecycle.serving() if p.state == "ready"]
            p99 = self.prometheus.ttft_quantile(0.99, spec.rate_window_s)
            utilisation = self.meter.mean(ready, now)
            self._finish_move()
            action = self._act(p99, utilisation, ready)
            row = {"time_s": now, "ttft_p99_s": p99, "bandwidth_utilisation": utilisation}
            self.rows.append(row | {"replicas": len(self.lifecycle.serving()), "action": action})

    def _act(self, p99: float, utilisation: float, ready: list[Pod]) -> str:
        if self._settling():
            return "settling"
        spec = self.spec
        if isinstance(spec, ClosedLoopController):
            action: Action = closed_loop_step(spec, p99, utilisation)
        else:
            action = ttft_step(spec, p99)
        if action == "add":
            if len(self.lifecycle.serving()) >= spec.max_replicas:
                return "at max_replicas"
            added = self.lifecycle.scale_to(self.lifecycle.desired + 1)  # a promoted warm pod is ready at once
            self.started = added[-1] if added else None  # none: a move left one serving pod more than desired
        elif action == "move":
            victim = busiest_pod(ready)
            if victim is None:
                return "nothing to move"
            self.started, self.replaced = self.lifecycle.move_away(victim), victim
        if action != "hold":
            self.acted_s = self.env.now
        return action

    def _settling(self) -> bool:
        waiting = self.started is not None and self.started.state in ("pending", "starting")
        return waiting or self.env.now - self.acted_s < self.spec.cooldown_s

    def _finish_move(self) -> None:
        """Drain the moved pod's old copy once the new one is ready (or keep it if the new one is gone)."""
        if self.replaced is None or self.started is None:
            return
        if self.started.state == "ready" and self.replaced.state == "ready":
            self.lifecycle.retire(self.replaced)
        if self.started.state not in ("pending", "starting"):
            self.replaced = None
