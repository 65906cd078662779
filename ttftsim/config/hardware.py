"""Schema of a hardware profile (hwprofiles/*.yaml): one accelerator, its node, and where each number comes from.

Peak FLOP/s are the dense figures, never the 2:4-sparse ones. Bandwidths are per GPU and one direction.
Every per-accelerator fact lives here, not in Python: the device name vLLM's defaults read, the Kubernetes
node labels that name the GPU (validate reads them, plan writes them), the NCCL memory reserve, the name
other tools give the system. Adding a GPU means adding one file.
The `roofline` block holds the default efficiencies the iteration-time model uses before a calibration
replaces them; `overhead` holds the engine's fixed per-iteration host time on this kind of host.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ttftsim.config.base import StrictModel

# Plausible hardware, with room on both sides (a CPU core to many times a GB200): figures far outside give steps
# of days or of nothing, and a simulation that says nothing true
MIN_FLOPS, MAX_FLOPS = 1e9, 5e16  # 10x the fastest dense format listed (B300 fp8, 5e15): 835e15 is a typo
MIN_BYTES_PER_S, MAX_BYTES_PER_S = 1e8, 1e15
# a device's memory in bytes: 1 GB to 10 TB (94 or 94e15 is GB or a typo, not an accelerator)
MIN_MEMORY_BYTES, MAX_MEMORY_BYTES = 1_000_000_000, 10_000_000_000_000
MAX_STEP_OVERHEAD_S = 0.5  # host time a step: vLLM's is milliseconds (3 would be ms written as s)


class PeakFlops(StrictModel):
    """Dense peak FLOP/s per number format (tensor cores for the low-precision formats)."""

    bf16: float = Field(ge=MIN_FLOPS, le=MAX_FLOPS, description="Dense BF16 tensor FLOP/s")
    fp16: float = Field(ge=MIN_FLOPS, le=MAX_FLOPS, description="Dense FP16 tensor FLOP/s")
    fp32: float = Field(ge=MIN_FLOPS, le=MAX_FLOPS, description="FP32 (non-tensor) FLOP/s")
    fp8: float | None = Field(
        default=None, ge=MIN_FLOPS, le=MAX_FLOPS, description="Dense FP8 FLOP/s; null where unsupported (A100)"
    )
    int8: float = Field(ge=MIN_FLOPS, le=MAX_FLOPS, description="Dense INT8 tensor OP/s")


class Link(StrictModel):
    """A GPU-to-GPU path: NVLink, PCIe, or the inter-node network."""

    kind: Literal["nvlink", "infinity_fabric", "pcie", "network", "shared_memory"] = Field(
        description="Kind of link (infinity_fabric: AMD Instinct GPU-to-GPU links)"
    )
    bw_bytes_per_s: float = Field(
        ge=MIN_BYTES_PER_S, le=MAX_BYTES_PER_S, description="Unidirectional bandwidth per GPU, bytes/s"
    )
    latency_s: float = Field(ge=0, description="Per-message latency floor (software + wire), seconds")


class RooflineDefaults(StrictModel):
    """Efficiencies applied before calibration: achieved / peak, as functions of shape.

    GEMM compute efficiency = gemm_max_efficiency x m / (m + gemm_half_tokens) for m tokens;
    memory efficiency = mem_bw_efficiency x b / (b + mem_half_bytes) for a kernel moving b bytes.
    """

    gemm_max_efficiency: float = Field(gt=0, le=1, description="Large-GEMM fraction of dense peak")
    gemm_half_tokens: float = Field(ge=0, description="Token count at which GEMM efficiency is half its maximum")
    attention_efficiency: float = Field(gt=0, le=1, description="Prefill attention fraction of dense peak")
    mem_bw_efficiency: float = Field(gt=0, le=1, description="Large-transfer fraction of memory bandwidth")
    mem_half_bytes: float = Field(ge=0, description="Transfer size at which bandwidth efficiency is half")
    link_efficiency: float = Field(gt=0, le=1, description="All-reduce bus bandwidth fraction of link bandwidth")


class Overhead(StrictModel):
    """Fixed host-side time per engine iteration (scheduling, sampling, kernel launches). A step replayed
    from PIECEWISE CUDA graphs sits between the two (perf/iteration.py PIECEWISE_HOST_SHARE); with async
    scheduling the host time overlaps the device time."""

    iteration_s: float = Field(
        ge=0,
        le=MAX_STEP_OVERHEAD_S,
        description="Per-iteration host time of a step run without CUDA graphs (above the capture limit, eager)",
    )
    decode_graph_iteration_s: float = Field(
        ge=0,
        le=MAX_STEP_OVERHEAD_S,
        description="Per-iteration host time of a decode-only step replayed from a FULL CUDA graph",
    )


class BorrowedCurves(StrictModel):
    """Kernel curves this GPU takes from another profile's calibration where its own has none of a class: for GPUs
    of one compute die (H200 is H100's GH100 with faster, larger memory). A curve is efficiencies of the peaks
    (calibration/curves.py), so it is evaluated with this profile's peaks and bandwidth."""

    profile: str = Field(
        min_length=1, description="The profile whose calibration lends its curves, e.g. H100-SXM5-80GB"
    )
    classes: list[Literal["moe"]] = Field(
        min_length=1, description="Operator classes lent (moe: the fused-MoE kernels)"
    )


class HardwareProfile(StrictModel):
    """One accelerator type. Invariant: every numeric figure has an entry in `sources`."""

    name: str = Field(description="Profile name, e.g. H100-SXM5-80GB")
    kind: Literal["gpu", "cpu"] = Field(description="gpu, or cpu for a CPU-only host")
    memory_bytes: int = Field(
        ge=MIN_MEMORY_BYTES, le=MAX_MEMORY_BYTES, description="Device memory as the driver reports it, bytes"
    )
    mem_bw_bytes_per_s: float = Field(
        ge=MIN_BYTES_PER_S, le=MAX_BYTES_PER_S, description="Peak device-memory bandwidth, bytes/s"
    )
    l2_bytes: int = Field(ge=0, description="Last-level cache size, bytes")
    peak_flops: PeakFlops = Field(description="Dense peak compute per number format")
    intra_node_link: Link = Field(description="GPU-to-GPU link inside a node")
    inter_node_link: Link = Field(description="Network between nodes, per GPU")
    host_to_device_bw_bytes_per_s: float = Field(
        ge=MIN_BYTES_PER_S, le=MAX_BYTES_PER_S, description="Host-to-device copy bandwidth, bytes/s"
    )
    gpus_per_node: int = Field(ge=1, le=64, description="Accelerators per node")
    device_name: str = Field(
        min_length=1,
        description="The name the driver reports (nvidia-smi --query-gpu=name, torch.cuda.get_device_name), "
        "e.g. NVIDIA H100 80GB HBM3; vLLM picks its default batch limits from it and the memory size",
    )
    cuda_compute_capability: str | None = Field(
        default=None,
        pattern=r"^[0-9]+\.[0-9]+$",
        description="CUDA compute capability (9.0 Hopper, 10.0 Blackwell B200/GB200, ...); vLLM picks MLA "
        "attention kernels, and the KV block size they need, from it. None: not an NVIDIA GPU",
    )
    node_labels: dict[str, list[str]] = Field(
        description="Kubernetes node labels that mark a node with this accelerator: label key -> the values that "
        "mean it (GPU feature discovery's nvidia.com/gpu.product, GKE's cloud.google.com/gke-accelerator, "
        "Karpenter's karpenter.k8s.aws/instance-gpu-name, ...). validate reads a pod's hardware from any of them "
        "(values match case-insensitively); plan pins its pods with the first key's first value"
    )
    nccl_reserve_bytes_by_tp: dict[int, int] = Field(
        min_length=1,
        description="NCCL buffers per GPU by tensor-parallel size, bytes (part of vLLM's non-torch memory); a TP "
        "size not listed takes the next larger one listed, or the largest listed beyond them",
    )
    aiconfigurator_system: str | None = Field(
        default=None,
        description="AIConfigurator's name for this system (h100_sxm, ...): ground truth and kernel tables "
        "that name it resolve to this profile",
    )
    curves_from: BorrowedCurves | None = Field(
        default=None,
        description="Kernel curves taken from another profile's calibration where this GPU's has none of a class "
        "(the same compute die), evaluated with this profile's peaks and bandwidth",
    )
    price_per_gpu_hour_usd: float = Field(ge=0, description="Default price per GPU-hour; users override it")
    roofline: RooflineDefaults = Field(description="Default efficiencies before calibration")
    overhead: Overhead = Field(description="Fixed per-iteration host overhead")
    sources: dict[str, str] = Field(description="Where each figure comes from, keyed by field name")

    @model_validator(mode="after")
    def _every_figure_sourced(self) -> HardwareProfile:
        required = {
            "memory_bytes",
            "mem_bw_bytes_per_s",
            "l2_bytes",
            "peak_flops",
            "intra_node_link",
            "inter_node_link",
            "host_to_device_bw_bytes_per_s",
            "price_per_gpu_hour_usd",
            "roofline",
            "overhead",
            "nccl_reserve_bytes_by_tp",
        }
        if self.cuda_compute_capability is not None:
            required.add("cuda_compute_capability")
        if self.curves_from is not None:
            required.add("curves_from")
        missing = sorted(required - set(self.sources))
        if missing:
            raise ValueError(f"sources has no entry for {', '.join(missing)}")
        return self

    @model_validator(mode="after")
    def _sane_tables(self) -> HardwareProfile:
        bad_tp = {tp: size for tp, size in self.nccl_reserve_bytes_by_tp.items() if tp < 1 or size < 0}
        if bad_tp:
            raise ValueError(f"nccl_reserve_bytes_by_tp needs TP sizes >= 1 and bytes >= 0, got {bad_tp}")
        empty = sorted(key for key, values in self.node_labels.items() if not key or not all(values) or not values)
        if empty:
            raise ValueError(
                f"node_labels {', '.join(map(repr, empty))}: a label key needs one or more non-empty values"
            )
        return self
