"""The cluster as SimPy processes, wired from parts with one job each:

- provisioner.py: nodes, node pools, the provisioner that adds nodes for pending pods and removes empty ones;
- placement.py: kube-scheduler's filters and scores, and the Binder that binds pods (gangs included);
- lifecycle.py: pods from Pending through the cold start to Ready, the warm pool, scale-down, termination;
- faults.py: injected node and pod failures, and the ReplicaSet's replacements;
- gateway.py: routing (routing/), the hold queue, retries, the prefill/decode KV transfer;
- scrapes.py and autoscaler.py: Prometheus' scrapes and the HPA's control loop (hpa.py calculates);
- controllers.py and alerts.py: a custom controller and alert rules on the scrapes and on the pods' GPU
  memory-bandwidth utilisation (bandwidth.py);
- accounting.py: the time series, the pod rows and the bill.

ClusterSim builds them, starts their processes in a fixed order (the order decides same-instant ties,
and the parts share the run's seeded generator: the binder's and the routers' draws interleave in event
order) and answers what the run needs at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import simpy

from ttftsim.cluster.accounting import Accounting
from ttftsim.cluster.alerts import AlertEvaluator, Firing
from ttftsim.cluster.autoscaler import Autoscaler
from ttftsim.cluster.bandwidth import BandwidthMeter
from ttftsim.cluster.controllers import ControllerLoop
from ttftsim.cluster.faults import Faults
from ttftsim.cluster.gateway import Gateway
from ttftsim.cluster.lifecycle import PodLifecycle, Recorders
from ttftsim.cluster.placement import Binder, Node, PodShape
from ttftsim.cluster.pod import Pod, ReplicaBuild, Wrap
from ttftsim.cluster.provisioner import Provisioner
from ttftsim.cluster.scrapes import Prometheus, TtftHistogram
from ttftsim.config.cluster import Cluster
from ttftsim.engine.recorder import Recorder

__all__ = ["ClusterLog", "ClusterSim", "Pod", "ReplicaBuild", "Wrap"]


@dataclass(frozen=True)
class ClusterLog:
    pods: list[dict[str, Any]]  # one row per pod, written at the end
    series: list[dict[str, float]]  # one row per metrics window
    hpa: list[dict[str, float]]  # one row per HPA sync or activation
    faults: list[dict[str, Any]]  # one row per injected fault
    pending_reasons: list[str]  # at the end, for pods still pending
    controller: list[dict[str, Any]]  # one row per controller period
    alert_firings: list[Firing]  # every firing of an alert rule
    alert_scale_outs: int  # replicas added by scale_out alert actions
    alerting: bool  # the cluster has alert rules


class ClusterSim:
    """The wiring. Upward calls (a node became ready, a draining pod emptied, a request found no serving
    pod) go through this class's methods, so no part imports one above it."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: Cluster,
        builds: Callable[[str], ReplicaBuild],
        recorder: Recorder,
        rng: np.random.Generator,
        window_s: float,
        tp: int,
        client_timeout_s: float | None = None,
        server_ttft_extra_s: float = 0.0,
    ) -> None:
        self.env, self.spec = env, spec
        shape = PodShape(spec.pod.gpus if spec.pod.gpus is not None else tp, spec.interference.pods_per_gpu)
        self.prefill_recorder = Recorder(0.0)  # prefill pods' records: iterations, never client requests
        histogram = TtftHistogram(server_ttft_extra_s)
        self.provisioner = Provisioner(env, spec, shape, on_node_ready=self._schedule_pending)
        self.binder = Binder(spec.pod, spec.node_pools, shape, rng)
        activate = self._activate if spec.autoscaling is not None else None
        self.gateway = Gateway(env, spec, recorder, rng, client_timeout_s, self._drained, activate)
        recorders = Recorders(recorder, self.prefill_recorder)
        self.lifecycle = PodLifecycle(
            env, spec, builds, self.provisioner, self.binder, self.gateway, recorders, histogram.observe
        )
        self.autoscaler: Autoscaler | None = None
        self.prometheus: Prometheus | None = None
        if spec.autoscaling is not None or spec.controller is not None or spec.alerting is not None:
            windows = [s.rate_window_s for s in (spec.controller, spec.alerting) if s is not None]
            self.prometheus = Prometheus(env, spec.autoscaling, histogram, self.lifecycle.serving, max(windows or [0]))
        if spec.autoscaling is not None:
            assert self.prometheus is not None
            self.autoscaler = Autoscaler(env, spec.autoscaling, self.lifecycle, self.prometheus)
        self.controller = self._controller(recorder)
        self.alerts = self._alerts(recorder)
        self.faults = Faults(env, self.provisioner, self.lifecycle)
        self.accounting = Accounting(env, window_s, self.provisioner, self.lifecycle, self.gateway)
        self.route = self.gateway.route  # the workload's entry (a bound method: no extra call per request)
        self._pending_reasons: list[str] = []
        self._start()

    def _start(self) -> None:
        self.provisioner.start()
        self.lifecycle.start()
        env = self.env
        env.process(self.lifecycle.retry_loop())
        env.process(self.provisioner.removal_loop())
        env.process(self.accounting.run())
        if self.prometheus is not None:
            env.process(self.prometheus.run())
        if self.autoscaler is not None:
            env.process(self.autoscaler.run())
        if self.controller is not None:
            env.process(self.controller.run())
        if self.alerts is not None:
            env.process(self.alerts.run())
        self.faults.start(self.spec.faults)

    def _controller(self, recorder: Recorder) -> ControllerLoop | None:
        spec = self.spec.controller
        if spec is None or self.prometheus is None:
            return None
        meter = BandwidthMeter(recorder, lambda: self.lifecycle.pods, spec.period_s)
        return ControllerLoop(self.env, spec, self.lifecycle, self.prometheus, meter)

    def _alerts(self, recorder: Recorder) -> AlertEvaluator | None:
        spec = self.spec.alerting
        if spec is None or self.prometheus is None:
            return None
        meter = BandwidthMeter(recorder, lambda: self.lifecycle.pods, spec.evaluation_interval_s)
        return AlertEvaluator(self.env, spec, self.lifecycle, self.prometheus, meter, lambda: self.gateway.num_held)

    # ---- upward calls ----

    def _schedule_pending(self) -> None:
        self.lifecycle.schedule_pending()

    def _drained(self, pod: Pod) -> None:
        self.lifecycle.drained(pod)

    def _activate(self) -> None:
        assert self.autoscaler is not None
        self.autoscaler.activate()

    # ---- what the run reads ----

    @property
    def pods(self) -> list[Pod]:
        return self.lifecycle.pods

    @property
    def nodes(self) -> list[Node]:
        return self.provisioner.nodes

    @property
    def attempts(self) -> dict[int, int]:
        """Attempts of each request retried at least once (the first included)."""
        return self.gateway.attempts

    @property
    def prefill_done_s(self) -> dict[int, float]:
        return self.gateway.prefill_done_s

    @property
    def kv_transfer_s(self) -> dict[int, float]:
        return self.gateway.kv_transfer_s

    @property
    def log(self) -> ClusterLog:
        hpa = self.autoscaler.rows if self.autoscaler is not None else []
        acc = self.accounting
        controller = self.controller.rows if self.controller is not None else []
        firings = self.alerts.firings if self.alerts is not None else []
        scale_outs = self.alerts.scale_outs if self.alerts is not None else 0
        return ClusterLog(
            acc.pod_rows,
            acc.series,
            hpa,
            self.faults.log,
            self._pending_reasons,
            controller,
            firings,
            scale_outs,
            self.alerts is not None,
        )

    def scale_to(self, desired: int) -> None:
        self.lifecycle.scale_to(desired)

    def idle(self) -> bool:
        return self.gateway.idle()

    def stuck(self) -> bool:
        return self.lifecycle.stuck()

    def close(self) -> None:
        """At the horizon: record what is still in flight (gateway queue included) and close the books."""
        self.gateway.close(self.pods)
        self.accounting.close()
        if self.alerts is not None:
            self.alerts.close()
        self.provisioner.close()
        pending = any(p.state == "pending" for p in self.pods)
        self._pending_reasons = self.provisioner.unschedulable() if pending else []

    def cost(self) -> dict[str, float]:
        return self.accounting.cost()

    def frames(self) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        log = self.log
        return pd.DataFrame(log.pods), pd.DataFrame(log.series), pd.DataFrame(log.hpa)
