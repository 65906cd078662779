"""The `cluster` section of a scenario: node pools, the serving pod, autoscaling, routing and faults.

This module holds the section itself (Cluster, with its check that one actor owns the replica count) and
the smaller parts: injected faults, retries, co-location interference and prefill/decode disaggregation.
Node pools and the pod are config/cluster_nodes.py, the HPA config/cluster_autoscaling.py, the routers
config/cluster_routing.py, controllers and alerts config/cluster_control.py.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ttftsim.config.base import StrictModel
from ttftsim.config.cluster_autoscaling import Autoscaling
from ttftsim.config.cluster_control import Alerting, Controller
from ttftsim.config.cluster_nodes import NodePool, PodSpec
from ttftsim.config.cluster_routing import RoundRobinRouter, Router


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
    router: Router = Field(default_factory=RoundRobinRouter, description="Gateway routing (default: round_robin)")
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
