"""The `cluster.autoscaling` section: a HorizontalPodAutoscaler (autoscaling/v2) on vLLM metrics, its
scaling behavior, and which pods a scale-down removes.

Defaults are Kubernetes' (serving-semantics.md part 1): 15 s sync, 10 % tolerance, 0 s / 300 s
stabilization, +max(4 pods, 100 %) / -100 % per 15 s. The HPA's loop is cluster/hpa.py; the scale-down
order cluster/scale_down.py. Custom controllers and alert rules are config/cluster_control.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from ttftsim.config.base import StrictModel


class ScalingPolicy(StrictModel):
    type: Literal["Pods", "Percent"] = Field(description="Pods or Percent")
    value: int = Field(ge=1, description="Pods, or percent of current replicas")
    period_s: float = Field(default=15.0, gt=0, description="periodSeconds")


class ScalingRules(StrictModel):
    stabilization_window_s: float = Field(ge=0, description="stabilizationWindowSeconds")
    select_policy: Literal["Max", "Min", "Disabled"] = Field(default="Max", description="selectPolicy")
    policies: list[ScalingPolicy] = Field(min_length=1, description="Rate limits (at least one, as Kubernetes asks)")


def _scale_up_default() -> ScalingRules:
    return ScalingRules(
        stabilization_window_s=0.0,
        policies=[ScalingPolicy(type="Pods", value=4), ScalingPolicy(type="Percent", value=100)],
    )


def _scale_down_default() -> ScalingRules:
    return ScalingRules(stabilization_window_s=300.0, policies=[ScalingPolicy(type="Percent", value=100)])


class HpaMetric(StrictModel):
    name: Literal["ttft_p99_s", "num_requests_waiting", "num_requests_running", "kv_cache_usage_perc"] = Field(
        description="ttft_p99_s: histogram_quantile(0.99) of vllm:time_to_first_token_seconds over all pods "
        "(an External metric, target Value); the others: per-pod vLLM gauges averaged (Pods, AverageValue)"
    )
    target: float = Field(gt=0, description="Target value (seconds, requests, or a fraction)")


class ReplicaSetScaleDown(StrictModel):
    """The ReplicaSet controller's own order (ActivePodsWithRanks): unassigned, not ready, pods doubled up
    on a node, then the most recently ready (cluster/scale_down.py)."""

    type: Literal["replicaset"] = Field(default="replicaset", description="Kubernetes' ReplicaSet ranking")
    logarithmic: bool = Field(
        default=True,
        description="LogarithmicScaleDown (on from Kubernetes 1.22, GA 1.31): ready times compared by "
        "power-of-two buckets, ties at random",
    )


class DeletionCostScaleDown(StrictModel):
    """A controller keeps controller.kubernetes.io/pod-deletion-cost at each pod's requests in flight, so
    the least busy ready pods are removed first."""

    type: Literal["deletion_cost"] = Field(description="pod-deletion-cost = requests in flight")
    logarithmic: bool = Field(default=True, description="LogarithmicScaleDown for the rest of the order")


def _replicaset_by_default(value: Any) -> Any:
    return {**value, "type": "replicaset"} if isinstance(value, dict) and "type" not in value else value


ScaleDownRankingSpec = Annotated[
    ReplicaSetScaleDown | DeletionCostScaleDown, Field(discriminator="type"), BeforeValidator(_replicaset_by_default)
]


class Autoscaling(StrictModel):
    """A HorizontalPodAutoscaler (autoscaling/v2) on vLLM metrics scraped by Prometheus."""

    min_replicas: int = Field(
        default=1,
        ge=0,
        description="minReplicas; 0 = scale to zero (Kubernetes' HPAScaleToZero; an activator, as KEDA's or "
        "Knative's, starts one replica when a request arrives to none)",
    )
    max_replicas: int = Field(ge=1, description="maxReplicas")
    metrics: list[HpaMetric] = Field(min_length=1, description="Metrics; the HPA takes the max over them")
    sync_period_s: float = Field(default=15.0, gt=0, description="--horizontal-pod-autoscaler-sync-period")
    tolerance: float = Field(default=0.1, ge=0, lt=1, description="--horizontal-pod-autoscaler-tolerance")
    scrape_interval_s: float = Field(default=15.0, gt=0, description="Prometheus scrape interval")
    rate_window_s: float = Field(default=60.0, gt=0, description="rate() window of the TTFT histogram query")
    scale_up: ScalingRules = Field(default_factory=_scale_up_default, description="behavior.scaleUp")
    scale_down: ScalingRules = Field(default_factory=_scale_down_default, description="behavior.scaleDown")
    scale_down_ranking: ScaleDownRankingSpec = Field(
        default_factory=ReplicaSetScaleDown,
        description="Which pods a scale-down removes: replicaset (Kubernetes' order; the default) or deletion_cost",
    )

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas {self.min_replicas} > max_replicas {self.max_replicas}")
        if any(m.name == "ttft_p99_s" for m in self.metrics) and self.rate_window_s < 2 * self.scrape_interval_s:
            raise ValueError(  # rate() over fewer than two samples has no value: the HPA would never act on it
                f"rate_window_s {self.rate_window_s:g} holds fewer than two scrapes every "
                f"{self.scrape_interval_s:g} s: the TTFT quantile never has a value and the HPA never scales on it "
                "(use at least twice the scrape interval; Prometheus advises four times)"
            )
        return self
