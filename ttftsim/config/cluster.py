"""The `cluster` section of a scenario: node pools, the serving pod, autoscaling, routing and faults.

Defaults are those of the real systems (serving-semantics.md parts 1, 2 and 4): HPA 15 s sync, 10 %
tolerance, 0 s / 300 s stabilization, +max(4 pods, 100 %) / -100 % per 15 s; kube-scheduler weights;
Karpenter batching 1-10 s, Cluster Autoscaler 10 s scans, 3-4 min GCE provisioning; cold-start phases
from the vLLM issues and loader benchmarks cited below.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ttftsim.config.base import StrictModel
from ttftsim.config.cluster_control import Alerting, Controller

# Sustained read bandwidth of each weight source, bytes/s (serving-semantics.md part 4):
# object_store: HF safetensors loader over the network, 0.31 GB/s (Run:ai streamer whitepaper, GP3 baseline);
# network_volume: Run:ai streamer on GP3, 1.05 GB/s; local_nvme: streamer on IO2, 2 GB/s;
# page_cache: 70 GB of FP8 weights in about 10 s from a hot page cache (vllm#19824); tmpfs: memory copy.
WEIGHT_SOURCE_BW = {
    "object_store": 0.31e9,
    "network_volume": 1.05e9,
    "local_nvme": 2.0e9,
    "page_cache": 7.0e9,
    "tmpfs": 20.0e9,
}


class Taint(StrictModel):
    key: str = Field(description="Taint key, e.g. nvidia.com/gpu")
    value: str = Field(default="", description="Taint value")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = Field(description="Taint effect")


class Toleration(StrictModel):
    key: str = Field(description="Key of the taint tolerated")
    value: str | None = Field(default=None, description="Value tolerated (None: any value, operator Exists)")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Effect tolerated (None: all effects)"
    )

    def tolerates(self, taint: Taint) -> bool:
        return (
            self.key == taint.key
            and (self.value is None or self.value == taint.value)
            and (self.effect is None or self.effect == taint.effect)
        )


class NodePool(StrictModel):
    """Identical nodes a provisioner can add and remove."""

    name: str = Field(description="Pool name (also the node label `pool`)")
    hardware: str = Field(description="Hardware profile of the nodes' accelerators, or CPU-host for CPU nodes")
    gpus_per_node: int | None = Field(default=None, ge=0, le=64, description="GPUs per node (default: the profile's)")
    cpus: int = Field(default=96, ge=1, description="Allocatable CPUs per node")
    memory_gib: float = Field(default=1024.0, gt=0, description="Allocatable memory per node, GiB")
    initial_nodes: int = Field(default=1, ge=0, description="Nodes running at time 0")
    min_nodes: int = Field(default=0, ge=0, description="The provisioner never goes below this")
    max_nodes: int = Field(default=4, ge=0, description="The provisioner never goes above this")
    price_per_node_hour_usd: float | None = Field(
        default=None, ge=0, description="Node price (default: GPUs x the profile's price per GPU-hour)"
    )
    provisioner: Literal["karpenter", "cluster-autoscaler"] = Field(
        default="karpenter", description="Who adds nodes for pending pods"
    )
    provision_s: float = Field(
        default=180.0, ge=0, description="Cloud VM creation to node Ready (GCE: 3-4 min, CA FAQ), seconds"
    )
    scale_down_unneeded_s: float = Field(
        default=600.0, ge=0, description="An empty node is removed after this long (CA --scale-down-unneeded-time)"
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Node labels")
    taints: list[Taint] = Field(default_factory=list, description="Node taints")
    images_cached: bool = Field(default=False, description="Nodes start with the serving image already pulled")

    @model_validator(mode="after")
    def _bounds(self) -> NodePool:
        if not self.min_nodes <= self.max_nodes:
            raise ValueError(f"min_nodes {self.min_nodes} > max_nodes {self.max_nodes}")
        if not self.initial_nodes <= self.max_nodes:
            raise ValueError(f"initial_nodes {self.initial_nodes} > max_nodes {self.max_nodes}")
        return self


class PreferredTerm(StrictModel):
    weight: int = Field(ge=1, le=100, description="preferredDuringScheduling weight")
    labels: dict[str, str] = Field(description="Node labels that must all match")


class NodeAffinity(StrictModel):
    required: dict[str, str] = Field(default_factory=dict, description="Labels a node must have (a Filter)")
    preferred: list[PreferredTerm] = Field(default_factory=list, description="Weighted preferences (a Score)")


class PodSpec(StrictModel):
    """The serving pod: resources, placement rules and its cold-start pipeline."""

    gpus: int | None = Field(default=None, ge=0, description="nvidia.com/gpu request (default: tensor_parallel_size)")
    cpus: float = Field(default=8.0, gt=0, description="CPU request")
    memory_gib: float = Field(default=64.0, gt=0, description="Memory request, GiB")
    node_affinity: NodeAffinity = Field(default_factory=NodeAffinity, description="nodeAffinity")
    max_per_node: int | None = Field(
        default=None, ge=1, description="Hard podAntiAffinity: at most this many serving pods per node"
    )
    tolerations: list[Toleration] = Field(default_factory=list, description="Tolerations")
    image_bytes: float = Field(
        default=20.2e9, gt=0, description="Image size (vLLM image with Llama-3.1-8B baked in: 20.2 GB, bentoml)"
    )
    registry_bytes_per_s: float = Field(default=0.2e9, gt=0, description="Image pull throughput, bytes/s")
    container_start_s: float = Field(default=15.0, ge=0, description="Container start and Python imports (10-20 s)")
    weights_source: Literal["object_store", "network_volume", "local_nvme", "page_cache", "tmpfs"] = Field(
        default="network_volume", description="Where weights are read from; a node's page cache serves later pods"
    )
    weights_bytes_per_s: float | None = Field(default=None, gt=0, description="Override the source's bandwidth")
    distributed_init_s: float = Field(default=5.0, ge=0, description="NCCL / P2P init when TP > 1, seconds")
    compile_s: float = Field(
        default=20.0, ge=0, description="torch.compile, cold cache (Dynamo + Inductor about 20 s, vllm#11005)"
    )
    compile_cached_s: float = Field(default=6.0, ge=0, description="torch.compile with a warm cache on the node")
    graph_capture_s: float = Field(default=10.0, ge=0, description="CUDA-graph capture (10 s for 8B, vllm#11005)")
    warmup_s: float = Field(default=2.0, ge=0, description="Warm-up requests before the readiness probe passes")
    termination_grace_s: float = Field(
        default=30.0, ge=0, description="terminationGracePeriodSeconds: a removed pod drains this long at most"
    )
    gang_scheduling: bool = Field(
        default=True,
        description="A pod larger than a node (a LeaderWorkerSet group) is placed all or nothing (LWS with "
        "Volcano, scheduler-plugins coscheduling or Kueue); false: kube-scheduler binds its leader and worker "
        "pods one by one, so groups can each hold part of what they need and wait",
    )


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
        description="Which pods a scale-down removes: replicaset (Kubernetes' order) or deletion_cost",
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


RouterName = Literal["round_robin", "least_outstanding", "power_of_two", "session_affinity", "prefix_aware", "kv_aware"]


class RoundRobinRouter(StrictModel):
    """The next ready replica in turn (vLLM production-stack's default)."""

    type: Literal["round_robin"] = Field(default="round_robin", description="Round robin (the default type)")


class LeastOutstandingRouter(StrictModel):
    """Fewest requests in flight at the gateway; ties at random."""

    type: Literal["least_outstanding"] = Field(description="Least outstanding requests")


class PowerOfTwoRouter(StrictModel):
    """Two distinct replicas at random, the one with fewer requests in flight (the first drawn on a tie)."""

    type: Literal["power_of_two"] = Field(description="Power of two choices")


class SessionAffinityRouter(StrictModel):
    """A session sticks to the replica it first went to while that one is ready; requests without a
    session, and new sessions, go to the least loaded."""

    type: Literal["session_affinity"] = Field(description="Session affinity")


class KvAwareRouter(StrictModel):
    """Lowest KV-cache usage as last scraped; ties at random."""

    type: Literal["kv_aware"] = Field(description="KV-cache-usage aware")
    metrics_refresh_s: float = Field(default=0.05, gt=0, description="How often the picker reads pod metrics (GIE)")


class PrefixAwareRouter(StrictModel):
    """The Gateway API Inference Extension / llm-d default profile: weighted queue, KV-usage and
    prefix-cache scorers over scraped pod metrics and an approximate prefix index per pod."""

    type: Literal["prefix_aware"] = Field(description="Prefix-cache aware (GIE scorers)")
    queue_weight: float = Field(default=2.0, ge=0, description="prefix_aware: queue-scorer weight (GIE default 2)")
    kv_weight: float = Field(default=2.0, ge=0, description="prefix_aware: kv-cache-utilization weight (GIE 2)")
    prefix_weight: float = Field(default=3.0, ge=0, description="prefix_aware: prefix-cache-scorer weight (GIE 3)")
    lru_blocks_per_pod: int = Field(default=31_250, ge=1, description="Approximate prefix index size per pod")
    metrics_refresh_s: float = Field(default=0.05, gt=0, description="How often the picker reads pod metrics (GIE)")


class _RouterType(BaseModel):
    """Only the `type` of a router section, to name an unknown one as the field `type`."""

    model_config = ConfigDict(extra="ignore")
    type: RouterName = Field(default="round_robin", description="How the gateway picks a ready replica")


def _router_type(value: Any) -> Any:
    """A router section without `type` is round robin (as ever); an unknown type is an error on `type`
    (a discriminated union would report it on the section)."""
    if isinstance(value, dict):
        named = _RouterType.model_validate(value)
        if "type" not in value:
            return {**value, "type": named.type}
    return value


Router = Annotated[
    RoundRobinRouter
    | LeastOutstandingRouter
    | PowerOfTwoRouter
    | SessionAffinityRouter
    | KvAwareRouter
    | PrefixAwareRouter,
    Field(discriminator="type"),
    BeforeValidator(_router_type),
]


class Fault(StrictModel):
    at_s: float = Field(ge=0, description="When it happens, seconds")
    kind: Literal["node", "pod"] = Field(description="A node fails (all its pods), or one pod")
    index: int = Field(default=0, ge=0, description="Which node or serving pod (in creation order) fails")


class RetryPolicy(StrictModel):
    max_attempts: int = Field(default=2, ge=1, description="Attempts per request, the first included")
    retry_started: bool = Field(
        default=False, description="Also retry requests that already streamed tokens (the client sees a restart)"
    )


class Interference(StrictModel):
    """How co-located pods slow each other (a model, not a measurement: set it from your own runs).

    Each iteration of a pod takes its solo time x (1 + sharing + node), counted when the iteration starts:
    sharing = busy other pods on its GPU (time-slicing gives each busy pod an equal share of the GPU's
    time, so k busy pods run k times slower) or mps_overlap x that count (MPS runs their kernels
    concurrently: 0 = perfect overlap, 1 = no better than time-slicing); node = node_penalty x busy
    other pods on the node (host memory bandwidth, PCIe, CPU). A pod is busy while it has running requests."""

    pods_per_gpu: int = Field(
        default=1, ge=1, le=16, description="Pods sharing one GPU (the device plugin's time-slicing replicas)"
    )
    sharing: Literal["time_slicing", "mps"] = Field(default="time_slicing", description="How a GPU is shared")
    mps_overlap: float = Field(default=0.5, ge=0, le=1, description="MPS: slowdown per busy co-located pod")
    node_penalty: float = Field(default=0.0, ge=0, le=1, description="Slowdown per busy other pod on the node")


# KV-transfer links between a prefill and a decode pod: effective bandwidth, bytes/s, and setup time, s
# (llm-d-inference-sim docs/latency-simulation.md: NVLink about 600 GB/s, IB NDR about 40 GB/s, Ethernet 100G
# about 10 GB/s; setup RDMA 0.5-2 ms, TCP 2-10 ms; NVLink setup is our assumption).
KV_LINKS = {"nvlink": (600e9, 0.0005), "rdma": (40e9, 0.001), "tcp": (10e9, 0.005)}


class Disaggregation(StrictModel):
    """Separate prefill and decode pods (vLLM P/D with a KV connector, as llm-d runs it): a request is
    prefilled on a prefill pod, its KV sent to a decode pod, which computes the last prompt token again
    (its logits give the first token) and decodes. TTFT counts the prefill queue, the prefill, the
    transfer and the decode pod's first step. `replicas` / autoscaling size the decode pods."""

    prefill_replicas: int = Field(ge=1, description="Prefill pods (a fixed count)")
    transfer: Literal["nvlink", "rdma", "tcp"] = Field(default="rdma", description="KV transfer link")
    bytes_per_s: float | None = Field(default=None, gt=0, description="Override the link's effective bandwidth")
    setup_s: float | None = Field(default=None, ge=0, description="Override the link's per-transfer setup time")

    def transfer_s(self, num_bytes: float) -> float:
        bandwidth, setup = KV_LINKS[self.transfer]
        return (self.setup_s if self.setup_s is not None else setup) + num_bytes / (self.bytes_per_s or bandwidth)


class Cluster(StrictModel):
    node_pools: list[NodePool] = Field(min_length=1, description="Node pools")
    pod: PodSpec = Field(default_factory=PodSpec, description="The serving pod")
    replicas: int = Field(
        default=1, ge=1, description="Replicas at the start; the HPA, if any, moves them within its bounds"
    )
    autoscaling: Autoscaling | None = Field(default=None, description="HPA; None = fixed replicas")
    warm_pool: int = Field(default=0, ge=0, description="Idle loaded pods kept ready to take traffic at once")
    router: Router = Field(default_factory=RoundRobinRouter, description="Gateway routing")
    faults: list[Fault] = Field(default_factory=list, description="Failures to inject")
    retry: RetryPolicy = Field(default_factory=RetryPolicy, description="What happens to a failed pod's requests")
    interference: Interference = Field(default_factory=Interference, description="Co-location slowdowns")
    disaggregation: Disaggregation | None = Field(default=None, description="Prefill/decode pools; None = mixed")
    slo_window_s: float = Field(default=60.0, gt=0, description="Window of the SLO-violation minutes")
    start_warm: bool = Field(
        default=True,
        description="The deployment is already running at time 0 (initial pods Ready, caches on their nodes); "
        "false: every initial pod cold-starts",
    )
    controller: Controller | None = Field(
        default=None, description="A custom controller acting on scraped signals; None = none"
    )
    alerting: Alerting | None = Field(default=None, description="Alert rules evaluated on the run; None = none")

    @model_validator(mode="after")
    def _one_replica_owner(self) -> Cluster:
        """One actor owns the serving replica count: the HPA, a controller, or alerts that scale out."""
        scales_out = self.alerting is not None and any(r.action == "scale_out" for r in self.alerting.rules)
        if self.controller is not None and self.autoscaling is not None:
            raise ValueError("controller: the HPA (autoscaling) already sets the replica count; keep one of them")
        if scales_out and (self.autoscaling is not None or self.controller is not None):
            owner = "autoscaling" if self.autoscaling is not None else "controller"
            raise ValueError(f"alerting.rules: a scale_out action and {owner} would both set the replica count")
        bounds = {"controller.max_replicas": self.controller.max_replicas if self.controller else None}
        bounds["alerting.max_replicas"] = self.alerting.max_replicas if self.alerting else None
        for field, bound in bounds.items():
            if bound is not None and bound < self.replicas:
                raise ValueError(f"{field} {bound} < replicas {self.replicas}")
        return self
