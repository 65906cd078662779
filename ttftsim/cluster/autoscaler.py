"""The HorizontalPodAutoscaler's control loop around hpa.py's calculator: every sync period it reads the
metric inputs (scrapes.py), reconciles, logs the sync and sets the ReplicaSet's replica count; and the
activator that scales from zero when a request finds no serving pod (KEDA's or Knative's, with
min_replicas 0). Not modelled: the controller's own jitter, readiness delays of the metrics pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

import numpy as np
import simpy

from ttftsim.cluster.hpa import ExternalMetricInput, Hpa
from ttftsim.cluster.lifecycle import PodLifecycle
from ttftsim.cluster.scrapes import Prometheus
from ttftsim.config.cluster_autoscaling import Autoscaling


class Autoscaler:
    """One row per sync in `rows` (time_s, current, ready, desired and each metric's value: an External
    metric's value, or the mean of a Pods metric's samples), and one per activation."""

    def __init__(
        self, env: simpy.Environment, spec: Autoscaling, lifecycle: PodLifecycle, prometheus: Prometheus
    ) -> None:
        self.env, self.spec, self.lifecycle, self.prometheus = env, spec, lifecycle, prometheus
        self.hpa = Hpa(spec)
        self.rows: list[dict[str, float]] = []

    def run(self) -> Generator[simpy.Event, Any, None]:
        spec = self.spec
        while True:
            yield self.env.timeout(spec.sync_period_s)
            serving = self.lifecycle.serving()
            current = len(serving)
            ready = sum(1 for p in serving if p.state == "ready")
            inputs = self.prometheus.metric_inputs()
            desired = self.hpa.reconcile(self.env.now, current, ready, inputs)
            row: dict[str, float] = {"time_s": self.env.now, "current": current, "ready": ready, "desired": desired}
            for metric, value in zip(spec.metrics, inputs, strict=True):
                if isinstance(value, ExternalMetricInput):
                    row[metric.name] = value.value
                else:
                    row[metric.name] = float(np.mean(value.samples)) if value.samples else math.nan
            self.rows.append(row)
            if desired != current:
                self.lifecycle.scale_to(desired)

    def activate(self) -> None:
        """A request found no serving pod: with none live (scaled to zero), start one."""
        if not self.lifecycle.serving():
            self.rows.append({"time_s": self.env.now, "current": 0, "ready": 0, "desired": 1})
            self.lifecycle.scale_to(1)
