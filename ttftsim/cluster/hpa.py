"""The Kubernetes HorizontalPodAutoscaler (autoscaling/v2), as pkg/controller/podautoscaler computes it.

One `reconcile` per sync period (serving-semantics.md 1.1):
- per metric a desired count: Pods metrics (`replica_calculator.calcPlainMetricReplicas`): the ratio of the
  average over pods with a sample to the target; within tolerance, keep; with pods missing a sample,
  count them at the target on a scale-down and at 0 on a scale-up, and keep if the recomputed ratio is within
  tolerance or flips direction. External Value metrics (`GetExternalMetricReplicas`): ceil(value / target x
  ready pods). A metric with no data is invalid; the max over valid metrics wins; none valid: no change;
- outside [min, max] the current count is first clamped;
- stabilization (`stabilizeRecommendationWithBehaviors`): the recommendation is the current count pulled
  up to the min of recommendations in the scale-up window and down to the max of those in the scale-down
  window; every raw recommendation is stored with its time;
- rate limits (`calculateScaleUpLimitWithScalingRules`, `...ScaleDownLimit...`): per policy, the count at
  the period's start (current - added + removed in the period) + Pods, or x (1 + Percent), rounded up for
  scale-up and down for scale-down; Max select takes the largest change; clamped to [min, max].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from ttftsim.config.cluster_autoscaling import Autoscaling, ScalingRules


@dataclass(frozen=True)
class PodsMetricInput:
    """A Pods metric: the samples of pods that report one, and how many of the replicas do not."""

    samples: tuple[float, ...]
    missing: int


@dataclass(frozen=True)
class ExternalMetricInput:
    """An External metric with a Value target (e.g. a cluster-wide TTFT P99); NaN = no data."""

    value: float


MetricInput = PodsMetricInput | ExternalMetricInput


def pods_metric_replicas(metric: PodsMetricInput, target: float, current: int, tolerance: float) -> int | None:
    """Desired replicas for one Pods metric (AverageValue target); None when no pod reports it."""
    samples = metric.samples
    if not samples:
        return None
    ratio = sum(samples) / len(samples) / target
    if metric.missing == 0:
        if abs(1.0 - ratio) <= tolerance:
            return current
        return math.ceil(ratio * len(samples))
    fill = target if ratio < 1.0 else 0.0
    count = len(samples) + metric.missing
    new_ratio = (sum(samples) + fill * metric.missing) / count / target
    if abs(1.0 - new_ratio) <= tolerance or (ratio < 1.0) != (new_ratio < 1.0):
        return current
    desired = math.ceil(new_ratio * count)
    # replica_calculator.go: "the change of metrics length would cause a change in scale direction"
    if (new_ratio < 1.0 and desired > current) or (new_ratio > 1.0 and desired < current):
        return current
    return desired


def external_metric_replicas(
    metric: ExternalMetricInput, target: float, current: int, ready: int, tolerance: float
) -> int | None:
    if math.isnan(metric.value):
        return None
    ratio = metric.value / target
    if abs(1.0 - ratio) <= tolerance:
        return current
    return math.ceil(ratio * ready)


@dataclass
class Hpa:
    spec: Autoscaling
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    scale_up_events: list[tuple[float, int]] = field(default_factory=list)
    scale_down_events: list[tuple[float, int]] = field(default_factory=list)

    def reconcile(self, now: float, current: int, ready: int, inputs: Sequence[MetricInput]) -> int:
        """The replica count the HPA sets at `now` (== current when it does not rescale)."""
        spec = self.spec
        if current > spec.max_replicas:
            desired = spec.max_replicas
        elif current < spec.min_replicas:
            desired = spec.min_replicas
        else:
            proposals = [self._metric_replicas(m, i, current, ready) for i, m in enumerate(inputs)]
            valid = [p for p in proposals if p is not None]
            if not valid:
                return current
            stabilized = self._stabilize(now, max(valid), current)
            desired = self._rate_limited(now, stabilized, current)
        if desired != current:
            events = self.scale_up_events if desired > current else self.scale_down_events
            events.append((now, abs(desired - current)))
        return desired

    def _metric_replicas(self, metric: MetricInput, index: int, current: int, ready: int) -> int | None:
        target, tolerance = self.spec.metrics[index].target, self.spec.tolerance
        if isinstance(metric, PodsMetricInput):
            return pods_metric_replicas(metric, target, current, tolerance)
        return external_metric_replicas(metric, target, current, ready, tolerance)

    def _stabilize(self, now: float, desired: int, current: int) -> int:
        up_cutoff = now - self.spec.scale_up.stabilization_window_s
        down_cutoff = now - self.spec.scale_down.stabilization_window_s
        up, down = desired, desired
        old = -1
        for index, (stamp, rec) in enumerate(self.recommendations):
            if stamp > up_cutoff:
                up = min(rec, up)
            if stamp > down_cutoff:
                down = max(rec, down)
            if stamp < up_cutoff and stamp < down_cutoff:
                old = index
        if old >= 0:
            self.recommendations[old] = (now, desired)
        else:
            self.recommendations.append((now, desired))
        return min(max(current, up), down)

    def _rate_limited(self, now: float, desired: int, current: int) -> int:
        spec = self.spec
        if desired > current:
            limit = max(self._limit(now, current, spec.scale_up, up=True), current)
            return min(desired, spec.max_replicas, limit)
        if desired < current:
            limit = min(self._limit(now, current, spec.scale_down, up=False), current)
            return max(desired, spec.min_replicas, limit)
        return desired

    def _limit(self, now: float, current: int, rules: ScalingRules, up: bool) -> int:
        if rules.select_policy == "Disabled":
            return current
        proposals = []
        for policy in rules.policies:
            added = sum(n for t, n in self.scale_up_events if t > now - policy.period_s)
            removed = sum(n for t, n in self.scale_down_events if t > now - policy.period_s)
            start = current - added + removed
            if policy.type == "Pods":
                proposals.append(start + policy.value if up else start - policy.value)
            elif up:
                proposals.append(math.ceil(start * (1 + policy.value / 100)))
            else:
                proposals.append(int(start * (1 - policy.value / 100)))
        # Max select = the largest change: the highest limit up, the lowest limit down
        largest_change = rules.select_policy == "Max"
        return (max if largest_change == up else min)(proposals)
