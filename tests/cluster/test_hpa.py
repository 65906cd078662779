"""The HPA on hand-worked cases: replica formulas, missing pods, stabilization and rate limits."""

from __future__ import annotations

import math

from ttftsim.cluster.hpa import (
    ExternalMetricInput,
    Hpa,
    PodsMetricInput,
    external_metric_replicas,
    pods_metric_replicas,
)
from ttftsim.config.cluster_autoscaling import Autoscaling, HpaMetric, ScalingPolicy, ScalingRules


def spec(**overrides: object) -> Autoscaling:
    fields: dict[str, object] = {"max_replicas": 10, "metrics": [HpaMetric(name="num_requests_waiting", target=5)]}
    fields.update(overrides)
    return Autoscaling.model_validate(fields)


def test_pods_metric_ratio_times_pods_rounded_up() -> None:
    assert pods_metric_replicas(PodsMetricInput((10.0, 10.0), 0), 5.0, 2, 0.1) == 4
    assert pods_metric_replicas(PodsMetricInput((6.0, 7.0, 1.0), 0), 5.0, 3, 0.1) == 3  # 14/3/5 = 0.933: tolerance
    assert pods_metric_replicas(PodsMetricInput((5.4,), 0), 5.0, 1, 0.1) == 1  # 1.08: within 10 %
    assert pods_metric_replicas(PodsMetricInput((5.6,), 0), 5.0, 1, 0.1) == 2  # 1.12: ceil(1.12)
    assert pods_metric_replicas(PodsMetricInput((), 3), 5.0, 3, 0.1) is None  # no samples: invalid
    # exactly on the tolerance (1.25 and 0.25 are exact in binary): kept, as replica_calculator's
    # isWithin is inclusive, (1 - tolerance) <= ratio <= (1 + tolerance)
    assert pods_metric_replicas(PodsMetricInput((6.25,), 0), 5.0, 1, 0.25) == 1
    assert pods_metric_replicas(PodsMetricInput((3.75,), 0), 5.0, 1, 0.25) == 1


def test_kubernetes_documented_examples_at_the_default_10_percent_tolerance() -> None:
    """desiredReplicas = ceil(currentReplicas x currentMetricValue / desiredMetricValue), with no change while
    the ratio is within 10 % of 1 (kubernetes.io, Horizontal Pod Autoscaling, "Algorithm details"; the
    Kubernetes v1.33 configurable-tolerance blog post): worked from those pages, at the config's defaults."""
    per_pod_100 = spec(max_replicas=100, metrics=[HpaMetric(name="num_requests_waiting", target=100)])
    # docs: 200m per pod against a 100m target doubles the replicas ...
    assert Hpa(per_pod_100).reconcile(15.0, 4, 4, [PodsMetricInput((200.0,) * 4, 0)]) == 8
    # ... and 50m halves them: ceil(4 x 0.5) = 2
    tolerance = spec().tolerance
    assert pods_metric_replicas(PodsMetricInput((50.0,) * 4, 0), 100.0, 4, tolerance) == 2
    # blog: 50 replicas at 90 % against a 75 % target: 50 x 90 / 75 = 60 (20 % over: beyond the 10 %)
    per_pod_75 = spec(max_replicas=100, metrics=[HpaMetric(name="num_requests_waiting", target=75)])
    assert Hpa(per_pod_75).reconcile(15.0, 50, 50, [PodsMetricInput((90.0,) * 50, 0)]) == 60
    # the 10 % band: 3 pods at 5.4 against 5 (ratio 1.08) stay at 3; at 5.6 (1.12) ceil(3 x 1.12) = ceil(3.36) = 4
    assert Hpa(spec()).reconcile(15.0, 3, 3, [PodsMetricInput((5.4,) * 3, 0)]) == 3
    assert Hpa(spec()).reconcile(15.0, 3, 3, [PodsMetricInput((5.6,) * 3, 0)]) == 4
    # below: 10 pods at 4.6 (0.92) stay; at 4.4 (0.88) ceil(10 x 0.88) = 9
    assert pods_metric_replicas(PodsMetricInput((4.6,) * 10, 0), 5.0, 10, tolerance) == 10
    assert pods_metric_replicas(PodsMetricInput((4.4,) * 10, 0), 5.0, 10, tolerance) == 9


def test_missing_pods_count_as_zero_up_and_as_target_down() -> None:
    # scale-up: 20 on one pod, one starting pod missing -> (20 + 0) / 2 / 10 = 1.0: keep
    assert pods_metric_replicas(PodsMetricInput((20.0,), 1), 10.0, 2, 0.1) == 2
    # scale-up survives: 40 -> (40 + 0) / 2 / 10 = 2.0 -> ceil(2 * 2) = 4
    assert pods_metric_replicas(PodsMetricInput((40.0,), 1), 10.0, 2, 0.1) == 4
    # scale-down: two idle pods, two missing -> (0 + 0 + 10 + 10) / 4 / 10 = 0.5 -> ceil(0.5 * 4) = 2
    assert pods_metric_replicas(PodsMetricInput((0.0, 0.0), 2), 10.0, 4, 0.1) == 2
    # direction flips: ratio 1.5 on one pod, three missing at 0 -> 15/4/10 = 0.375 < 1: keep
    assert pods_metric_replicas(PodsMetricInput((15.0,), 3), 10.0, 4, 0.1) == 4


def test_missing_pods_never_turn_a_scale_up_into_a_scale_down() -> None:
    # 5 replicas: 2 pending (no sample, not counted), 2 ready at 18 and 1 starting (missing) against a target of
    # 10: ratio 1.8, the missing pod at 0 -> 36 / 3 / 10 = 1.2, ceil(1.2 x 3) = 4 < 5 although the metric asks
    # for more: Kubernetes keeps 5
    assert pods_metric_replicas(PodsMetricInput((18.0, 18.0), 1), 10.0, 5, 0.1) == 5


def test_external_value_metric_scales_ready_pods() -> None:
    assert external_metric_replicas(ExternalMetricInput(2.0), 1.0, 3, 3, 0.1) == 6
    assert external_metric_replicas(ExternalMetricInput(1.05), 1.0, 3, 2, 0.1) == 3
    assert external_metric_replicas(ExternalMetricInput(2.5), 1.0, 4, 2, 0.1) == 5  # ready pods, not current
    assert external_metric_replicas(ExternalMetricInput(math.nan), 1.0, 3, 3, 0.1) is None
    assert external_metric_replicas(ExternalMetricInput(1.25), 1.0, 3, 3, 0.25) == 3  # on the tolerance: kept


def test_scale_up_is_limited_to_max_of_4_pods_and_100_percent_per_15_s() -> None:
    hpa = Hpa(spec(max_replicas=20))
    huge = [PodsMetricInput((100.0,), 0)]
    assert hpa.reconcile(15.0, 1, 1, huge) == 5  # max(1 + 4, ceil(1 * 2)) = 5
    # 15 s later the previous event (t=15) is not inside (30 - 15, 30]: period start is 5 -> max(9, 10) = 10
    assert hpa.reconcile(30.0, 5, 1, [PodsMetricInput((100.0,), 4)]) == 10
    assert hpa.reconcile(45.0, 10, 1, [PodsMetricInput((100.0,), 9)]) == 20  # max(14, 20), capped at max 20


def test_rate_limit_counts_events_inside_the_period() -> None:
    hpa = Hpa(spec(max_replicas=50, sync_period_s=5.0))
    assert hpa.reconcile(5.0, 2, 2, [PodsMetricInput((100.0, 100.0), 0)]) == 6  # max(2 + 4, 4)
    # at t=10 the +4 at t=5 is inside (-5, 10]: period start 2 -> still at most 6
    assert hpa.reconcile(10.0, 6, 2, [PodsMetricInput((100.0, 100.0), 4)]) == 6
    assert hpa.reconcile(20.1, 6, 2, [PodsMetricInput((100.0, 100.0), 4)]) == 12  # event out of the period


def test_scale_down_waits_for_the_300_s_window_maximum() -> None:
    hpa = Hpa(spec())
    busy = [PodsMetricInput((20.0, 20.0), 0)]
    assert hpa.reconcile(0.0, 2, 2, busy) == 6  # ceil(4 * 2) = 8, limited to max(2 + 4, 4) = 6
    replicas = 6
    history = []
    for t in range(15, 331, 15):
        replicas = hpa.reconcile(float(t), replicas, replicas, [PodsMetricInput((0.0,) * replicas, 0)])
        history.append(replicas)
    # the recommendation 8 made at t=0 holds the count at 6 while it is inside the window (stamp > now - 300)
    assert history[:19] == [6] * 19  # t = 15 .. 285
    assert history[19] == 1  # t = 300: the t=0 sample has left; -100 % per 15 s allows it; minReplicas 1


def test_max_over_metrics_and_invalid_metrics_are_skipped() -> None:
    hpa = Hpa(
        spec(metrics=[HpaMetric(name="num_requests_waiting", target=5), HpaMetric(name="ttft_p99_s", target=1.0)])
    )
    assert hpa.reconcile(15.0, 2, 2, [PodsMetricInput((5.0, 5.0), 0), ExternalMetricInput(1.8)]) == 4
    assert hpa.reconcile(30.0, 4, 4, [PodsMetricInput((), 4), ExternalMetricInput(math.nan)]) == 4


def test_disabled_scale_down_and_pods_policy() -> None:
    rules = ScalingRules(
        stabilization_window_s=0, select_policy="Disabled", policies=[ScalingPolicy(type="Pods", value=1)]
    )
    hpa = Hpa(spec(scale_down=rules))
    assert hpa.reconcile(15.0, 5, 5, [PodsMetricInput((0.0,) * 5, 0)]) == 5
    slow = ScalingRules(stabilization_window_s=0, policies=[ScalingPolicy(type="Pods", value=1, period_s=60)])
    hpa = Hpa(spec(scale_down=slow))
    assert hpa.reconcile(15.0, 5, 5, [PodsMetricInput((0.0,) * 5, 0)]) == 4
    assert hpa.reconcile(30.0, 4, 4, [PodsMetricInput((0.0,) * 4, 0)]) == 4  # one pod per 60 s
    assert hpa.reconcile(75.1, 4, 4, [PodsMetricInput((0.0,) * 4, 0)]) == 3
