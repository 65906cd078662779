"""The cost of each operator class: the seam where calibration replaces the roofline.

`KernelCosts` is what the iteration-time model asks. `RooflineCosts` answers with
max(compute time, memory time) under efficiencies that depend on shape (hardware profile, `roofline`
block); a calibration (calibration/) answers the same questions from measured curves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from ttftsim.config.dtypes import ComputeDtype
from ttftsim.config.hardware import HardwareProfile, Link


@dataclass(frozen=True, slots=True)
class AttentionShape:
    """Per-GPU attention geometry: heads after TP sharding (KV heads replicate when TP exceeds them).
    Multi-head latent attention (perf/mla.py) sets a value width unlike the query/key width (prefill: 128
    against 192 in DeepSeek-V3; decode over the latent: 512 against 576) and, for decode, `latent`: K and V
    are one cached vector, read once."""

    q_heads: int
    kv_heads: int
    head_dim: int
    kv_bytes: int
    v_head_dim: int = 0  # value width when it differs from head_dim; 0: head_dim
    latent: bool = False  # K and V are the same cached vector (MLA decode)

    @property
    def q_width(self) -> int:
        return self.q_heads * self.head_dim

    @property
    def value_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def pair_width(self) -> int:
        """Multiply-adds per query-key pair over this GPU's query heads: q.k over head_dim, p.v over the
        value width (2 x q_width for standard attention)."""
        return self.q_heads * (self.head_dim + self.value_dim)

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token in one layer on this GPU (one latent for MLA decode)."""
        width = self.head_dim if self.latent else self.head_dim + self.value_dim
        return self.kv_heads * width * self.kv_bytes


@dataclass(frozen=True, slots=True)
class MoeShape:
    """Per-GPU geometry of one fused-MoE layer: every expert's gate-up (2 inter x hidden) and down
    (hidden x inter) weights, inter being the expert width after TP sharding."""

    num_experts: int
    top_k: int
    hidden: int
    inter: int
    weight_bytes: float  # per parameter
    dtype: ComputeDtype

    def experts_hit(self, tokens: int) -> float:
        """Expected number of distinct experts `tokens` tokens route to, each picking top_k of num_experts
        at random: E (1 - (1 - k/E)^T)."""
        return self.num_experts * (1.0 - (1.0 - self.top_k / self.num_experts) ** tokens)


class KernelCosts(Protocol):
    """Seconds for one kernel of each operator class on one GPU."""

    def gemm_s(self, m: int, n: int, k: int, dtype: ComputeDtype, weight_bytes: float) -> float:
        """An (m x k) @ (k x n) GEMM whose weight matrix occupies weight_bytes."""
        ...

    def prefill_attention_s(self, tokens: int, pairs: int, kv_tokens: int, shape: AttentionShape) -> float:
        """Causal FlashAttention over `tokens` queries touching `pairs` query-key pairs."""
        ...

    def decode_attention_s(self, seqs: int, kv_tokens: int, shape: AttentionShape) -> float:
        """One query token per sequence reading `kv_tokens` cached tokens in all."""
        ...

    def decode_attention_many_s(
        self, seqs: int, kv_tokens: NDArray[np.float64], shape: AttentionShape
    ) -> NDArray[np.float64]:
        """decode_attention_s for many KV totals at once (a run of decode steps)."""
        ...

    def allreduce_s(self, message_bytes: float, ranks: int, link: Link) -> float:
        """An all-reduce of message_bytes across `ranks` GPUs over `link`."""
        ...

    def moe_s(self, tokens: int, hit: float, shape: MoeShape) -> float:
        """The fused experts of one MoE layer for `tokens` tokens spread over `hit` experts (vLLM
        fused_experts: top-k softmax, align, grouped gate-up GEMM, SiLU-mul, grouped down GEMM, top-k
        sum); the router GEMM and the all-reduce are separate."""
        ...

    def memory_s(self, moved_bytes: float) -> float:
        """A memory-bound element-wise kernel moving moved_bytes."""
        ...

    def extrapolated(self) -> list[str]:
        """Each kernel class whose times left the range it was calibrated on, said once, in the order met."""
        ...


class RooflineCosts:
    """Uncalibrated costs: each kernel takes max(FLOPs / achieved FLOP/s, bytes / achieved bandwidth)."""

    def __init__(self, hardware: HardwareProfile) -> None:
        self.hw = hardware
        roof = hardware.roofline
        self._bw = hardware.mem_bw_bytes_per_s * roof.mem_bw_efficiency
        # bytes/(bw*eff*b/(b+half)) = b/(bw*eff) + half/(bw*eff): the half-efficiency size is a latency.
        self._mem_latency_s = roof.mem_half_bytes / self._bw
        self._attn_flops = hardware.peak_flops.bf16 * roof.attention_efficiency

    def extrapolated(self) -> list[str]:
        return []  # the roofline has no calibrated range

    def _peak(self, dtype: ComputeDtype) -> float:
        peaks = self.hw.peak_flops
        value = getattr(peaks, dtype)
        return float(value) if value is not None else peaks.bf16

    def gemm_efficiency(self, m: int) -> float:
        roof = self.hw.roofline
        return roof.gemm_max_efficiency * m / (m + roof.gemm_half_tokens)

    def _gemm_parts(self, m: int, n: int, k: int, dtype: ComputeDtype, weight_bytes: float) -> tuple[float, float]:
        compute = 2.0 * m * n * k / (self._peak(dtype) * self.gemm_efficiency(m))
        return compute, self.memory_s(weight_bytes + 2.0 * m * (n + k))

    def gemm_s(self, m: int, n: int, k: int, dtype: ComputeDtype, weight_bytes: float) -> float:
        if m <= 0:
            return 0.0
        return max(self._gemm_parts(m, n, k, dtype, weight_bytes))

    def gemm_regime(
        self, m: int, n: int, k: int, dtype: ComputeDtype, weight_bytes: float
    ) -> Literal["compute", "memory"]:
        """Which roof bounds this GEMM."""
        compute, memory = self._gemm_parts(m, n, k, dtype, weight_bytes)
        return "compute" if compute >= memory else "memory"

    def prefill_attention_s(self, tokens: int, pairs: int, kv_tokens: int, shape: AttentionShape) -> float:
        if tokens <= 0:
            return 0.0
        compute = 2.0 * shape.pair_width * pairs / self._attn_flops
        moved = 2.0 * tokens * shape.pair_width + kv_tokens * shape.kv_bytes_per_token  # q in, out out; K, V
        return max(compute, self.memory_s(moved))

    def decode_attention_s(self, seqs: int, kv_tokens: int, shape: AttentionShape) -> float:
        if seqs <= 0:
            return 0.0
        compute = 2.0 * shape.pair_width * kv_tokens / self._attn_flops
        moved = kv_tokens * shape.kv_bytes_per_token + 2.0 * seqs * shape.pair_width
        return max(compute, self.memory_s(moved))

    def decode_attention_many_s(
        self, seqs: int, kv_tokens: NDArray[np.float64], shape: AttentionShape
    ) -> NDArray[np.float64]:
        compute = 2.0 * shape.pair_width * kv_tokens / self._attn_flops
        moved = kv_tokens * shape.kv_bytes_per_token + 2.0 * seqs * shape.pair_width
        memory = self._mem_latency_s + moved / self._bw
        result: NDArray[np.float64] = np.maximum(compute, memory)
        return result

    def allreduce_s(self, message_bytes: float, ranks: int, link: Link) -> float:
        if ranks <= 1:
            return 0.0
        bus_bytes = 2.0 * (ranks - 1) / ranks * message_bytes
        return link.latency_s + bus_bytes / (link.bw_bytes_per_s * self.hw.roofline.link_efficiency)

    def memory_s(self, moved_bytes: float) -> float:
        return self._mem_latency_s + moved_bytes / self._bw

    def moe_s(self, tokens: int, hit: float, shape: MoeShape) -> float:
        """Two grouped GEMMs over the hit experts, each reading a hit expert's weights once and running at
        the GEMM efficiency of its rows per expert, and the small routing and reduction kernels."""
        if tokens <= 0:
            return 0.0
        rows, h, inter = tokens * shape.top_k, shape.hidden, shape.inter
        efficiency = self.gemm_efficiency(max(1, round(rows / hit)))
        peak = self._peak(shape.dtype) * efficiency
        gate_up = max(
            4.0 * rows * inter * h / peak,
            self.memory_s(2.0 * hit * inter * h * shape.weight_bytes + 2.0 * rows * (h + 2 * inter)),
        )
        down = max(
            2.0 * rows * inter * h / peak,
            self.memory_s(hit * inter * h * shape.weight_bytes + 2.0 * rows * (inter + h)),
        )
        routing = 2.0 * self.memory_s(4.0 * tokens * (shape.num_experts + 2 * shape.top_k))  # top-k softmax, align
        reduce = self.memory_s(6.0 * rows * inter) + self.memory_s(2.0 * rows * h + 2.0 * tokens * h)  # SiLU-mul, sum
        return gate_up + down + routing + reduce
