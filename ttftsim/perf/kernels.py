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
    """Per-GPU attention geometry: heads after TP sharding (KV heads replicate when TP exceeds them)."""

    q_heads: int
    kv_heads: int
    head_dim: int
    kv_bytes: int

    @property
    def q_width(self) -> int:
        return self.q_heads * self.head_dim

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token in one layer on this GPU."""
        return 2 * self.kv_heads * self.head_dim * self.kv_bytes


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

    def memory_s(self, moved_bytes: float) -> float:
        """A memory-bound element-wise kernel moving moved_bytes."""
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
        compute = 4.0 * shape.q_width * pairs / self._attn_flops
        moved = (
            4.0 * tokens * shape.q_heads * shape.head_dim
            + 2.0 * kv_tokens * shape.kv_heads * shape.head_dim * shape.kv_bytes
        )
        return max(compute, self.memory_s(moved))

    def decode_attention_s(self, seqs: int, kv_tokens: int, shape: AttentionShape) -> float:
        if seqs <= 0:
            return 0.0
        compute = 4.0 * shape.q_width * kv_tokens / self._attn_flops
        moved = (
            2.0 * kv_tokens * shape.kv_heads * shape.head_dim * shape.kv_bytes
            + 4.0 * seqs * shape.q_heads * shape.head_dim
        )
        return max(compute, self.memory_s(moved))

    def decode_attention_many_s(
        self, seqs: int, kv_tokens: NDArray[np.float64], shape: AttentionShape
    ) -> NDArray[np.float64]:
        compute = 4.0 * shape.q_width * kv_tokens / self._attn_flops
        moved = (
            2.0 * kv_tokens * shape.kv_heads * shape.head_dim * shape.kv_bytes
            + 4.0 * seqs * shape.q_heads * shape.head_dim
        )
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
