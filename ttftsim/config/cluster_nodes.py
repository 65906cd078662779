"""The cluster's nodes and the serving pod: node pools (with their taints) a provisioner adds and removes, and
the pod's resources, placement rules (tolerations, node affinity, anti-affinity) and cold-start pipeline.

Defaults are those of the real systems (serving-semantics.md parts 1 and 4): Cluster Autoscaler scale-down
after 10 min unneeded, 3-4 min GCE provisioning; cold-start phases from the vLLM issues and loader benchmarks
cited below. What the scheduler and the provisioner do with these is in ttftsim/cluster (placement.py,
provisioner.py, coldstart.py); the HPA is config/cluster_autoscaling.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ttftsim.config.base import StrictModel

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
