"""Deployment factors (config/deployment_calibration.py) applied inside the cost models.

A team's deployment differs from the modelled one in ways kernel tables do not see: its driver and image, a
busier host, another tokenizer. `ttftsim fit` measures that difference as four factors that enter the
mechanism of the iteration-time model and of the API-server model, and this module applies them:
- on kernel costs (roofline or calibrated curves): GEMM and fused-MoE times divided by the GEMM scale,
  attention times by the attention scale; memory-bound element-wise kernels and all-reduces unchanged;
- on a measured step cost (LinearStepModel): per-token terms divided by the GEMM scale (the token-
  proportional work of a step is its GEMMs), per-KV-token and per-pair terms by the attention scale, the
  overhead added to the fixed term;
- on the host time of each step: the overhead added to the engine's (eager and CUDA-graph) host times;
- on the API server: every cost multiplied by its scale.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import NDArray

from ttftsim.config.deployment_calibration import Factors
from ttftsim.config.dtypes import ComputeDtype
from ttftsim.config.hardware import Link
from ttftsim.config.versions import ApiServerCosts
from ttftsim.perf.kernels import AttentionShape, KernelCosts, MoeShape
from ttftsim.perf.linear import LinearStepModel


class ScaledKernelCosts:
    """Another KernelCosts with GEMM (and MoE) times divided by gemm_scale and attention times by
    attention_scale. Invariant: with both scales 1 every answer equals the inner one's."""

    def __init__(self, inner: KernelCosts, gemm_scale: float, attention_scale: float) -> None:
        self.inner = inner
        self._gemm = 1.0 / gemm_scale
        self._attention = 1.0 / attention_scale

    def gemm_s(self, m: int, n: int, k: int, dtype: ComputeDtype, weight_bytes: float) -> float:
        return self.inner.gemm_s(m, n, k, dtype, weight_bytes) * self._gemm

    def prefill_attention_s(self, tokens: int, pairs: int, kv_tokens: int, shape: AttentionShape) -> float:
        return self.inner.prefill_attention_s(tokens, pairs, kv_tokens, shape) * self._attention

    def decode_attention_s(self, seqs: int, kv_tokens: int, shape: AttentionShape) -> float:
        return self.inner.decode_attention_s(seqs, kv_tokens, shape) * self._attention

    def decode_attention_many_s(
        self, seqs: int, kv_tokens: NDArray[np.float64], shape: AttentionShape
    ) -> NDArray[np.float64]:
        result: NDArray[np.float64] = self.inner.decode_attention_many_s(seqs, kv_tokens, shape) * self._attention
        return result

    def allreduce_s(self, message_bytes: float, ranks: int, link: Link) -> float:
        return self.inner.allreduce_s(message_bytes, ranks, link)

    def moe_s(self, tokens: int, hit: float, shape: MoeShape) -> float:
        return self.inner.moe_s(tokens, hit, shape) * self._gemm

    def memory_s(self, moved_bytes: float) -> float:
        return self.inner.memory_s(moved_bytes)

    def extrapolated(self) -> list[str]:
        return self.inner.extrapolated()


def scaled_kernel_costs(inner: KernelCosts, factors: Factors) -> KernelCosts:
    """The inner costs, wrapped only when a scale differs from 1."""
    if factors.gemm_efficiency_scale == 1.0 and factors.attention_efficiency_scale == 1.0:
        return inner
    return ScaledKernelCosts(inner, factors.gemm_efficiency_scale, factors.attention_efficiency_scale)


def scaled_linear(model: LinearStepModel, factors: Factors) -> LinearStepModel:
    """A measured step cost under the factors (the fixed term kept >= 0)."""
    gemm, attention = factors.gemm_efficiency_scale, factors.attention_efficiency_scale
    decode = model.per_decode_token_s
    return LinearStepModel(
        with_overhead(model.fixed_s, factors, "the measured step cost's fixed_s"),
        model.per_token_s / gemm,
        model.per_kv_token_s / attention,
        model.per_attn_pair_s / attention,
        None if decode is None else decode / gemm,
    )


def with_overhead(host_s: float, factors: Factors, what: str = "the host time per step", used: bool = True) -> float:
    """A host time per step plus the fitted overhead, kept >= 0, with a warning where it had to be (a
    hand-written overhead below the deployment's host time; `fit` bounds its own by it) and the time is used
    (a measured step cost replaces the hardware's host times)."""
    total = host_s + factors.step_overhead_s
    if used and total < -1e-12:  # not a rounding at fit's bound (the overhead = -host time)
        warnings.warn(
            f"deployment factors: step_overhead_s {factors.step_overhead_s * 1e3:+.2f} ms takes {what} "
            f"({host_s * 1e3:.2f} ms) below zero: kept at 0",
            stacklevel=2,
        )
    return max(0.0, total)


def scaled_api_server(costs: ApiServerCosts, factors: Factors) -> ApiServerCosts:
    scale = factors.api_server_cost_scale
    if scale == 1.0:
        return costs
    return ApiServerCosts(
        per_request_s=min(1.0, costs.per_request_s * scale),
        per_prompt_token_s=min(1e-3, costs.per_prompt_token_s * scale),
        per_output_token_s=min(1e-2, costs.per_output_token_s * scale),
        per_step_s=min(1e-1, costs.per_step_s * scale),
        hop_latency_s=costs.hop_latency_s,  # wall time of hand-offs, not the loop's CPU work
        server_ttft_extra_s=costs.server_ttft_extra_s,  # the same hand-offs, seen from vLLM's histogram
    )
