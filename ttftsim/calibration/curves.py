"""The cost curves a calibration fits, one per operator class, shared by the fitter and the simulator.

Each is the roofline with its efficiencies as fitted functions of shape (P = dense peak, W = memory
bandwidth of the profile; every parameter is positive):
- gemm:              max(2mnk / (P a m/(m+h)), (weights + activations) / (W e) + L)
- prefill attention: max(4 H d pairs / (P a s/(s+h)), bytes / (W e)) + L, s = tokens per sequence
- decode attention:  L + c batch + KV bytes / (W e)
- fused MoE:         max(2 r 3 I H / (P a q/(q+h)), (x 3 I H w + activations) / (W e) + L): r = tokens x top-k
                     routed rows, x experts hit, q = r / x rows per hit expert, I the expert width on this
                     GPU (vLLM fused_experts: one grouped gate-up GEMM and one grouped down GEMM over the
                     hit experts, each expert's weights read once, plus top-k, align, SiLU-mul, sum)
- all-reduce:        L + 2 (r-1)/r bytes / B per GPU count r, with its own L, B below and above vLLM's
                     custom all-reduce limit (8 MiB, `CustomAllreduce(max_size=8192 * 1024)`; larger
                     messages go to NCCL)

On top of each curve a calibration fits a smooth correction (splines.py) over the log2 shape features
below; `CORRECTIONS` says which features share a tensor-product term, how many knots and how much damping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
Values = Array | float  # a column of shapes (fitting) or one shape (the simulator, as plain floats: faster)
Params = Array | Sequence[float]

# what each shape feature of the fitted curves is, in words (a calibration's warnings)
SHAPE_WORDS = {
    "isl": "a prefill's length by its query-key pairs: a late chunk of a long prompt counts its context",
    "batch": "sequences in the batch",
    "heads": "attention heads",
    "kv_heads": "KV heads",
    "head_dim": "head size",
    "kv_bytes": "bytes per KV element",
    "hit": "cached tokens",
    "m": "tokens through the GEMM",
    "n": "GEMM output width",
    "k": "GEMM input width",
    "message_bytes": "bytes all-reduced",
    "ranks": "GPUs in the all-reduce",
    "tokens": "tokens through the experts",
    "experts": "experts",
    "top_k": "experts a token",
    "hidden": "hidden size",
    "inter": "expert width",
}

WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "int4": 0.5 + 2.0 / 128}  # int4: a fp16 scale per group of 128


def gemm(params: Params, peak: float, bw: float, m: Values, n: Values, k: Values, weight_bytes: float) -> Array:
    a, h, e, latency = params
    compute = 2.0 * m * n * k / (peak * a * m / (m + h))
    memory = (n * k * weight_bytes + 2.0 * m * (n + k)) / (bw * e) + latency
    result: Array = np.maximum(compute, memory)
    return result


def prefill_attention(
    params: Params,
    peak: float,
    bw: float,
    batch: Values,
    isl: Values,
    heads: Values,
    kv_heads: Values,
    head_dim: Values,
    kv_bytes: Values,
) -> Array:
    compute, memory, latency = _prefill_attention_terms(
        params, peak, bw, batch, isl, heads, kv_heads, head_dim, kv_bytes
    )
    result: Array = np.maximum(compute, memory) + latency
    return result


def prefill_attention_one(
    params: Params,
    peak: float,
    bw: float,
    batch: float,
    isl: float,
    heads: float,
    kv_heads: float,
    head_dim: float,
    kv_bytes: float,
) -> float:
    """prefill_attention of one shape, as a float: the same operations on doubles (NaN where numpy gives NaN),
    without numpy's scalar calls (the engine reads it on every prefill step its memo misses)."""
    compute, memory, latency = _prefill_attention_terms(
        params, peak, bw, batch, isl, heads, kv_heads, head_dim, kv_bytes
    )
    # np.maximum's value: the larger, NaN if either is (a broken fit)
    larger = compute if compute >= memory else memory if memory >= compute else math.nan
    return float(larger + latency)


def _prefill_attention_terms(params: Params, peak: float, bw: float, *shape: Values) -> tuple[Values, Values, float]:
    """The compute-bound and memory-bound times, and the fixed latency; `shape` as prefill_attention's (batch, isl,
    heads, kv_heads, head_dim, kv_bytes)."""
    a, h, e, latency = params
    batch, isl, heads, kv_heads, head_dim, kv_bytes = shape
    pairs = batch * isl * (isl + 1) / 2.0
    compute = 4.0 * heads * head_dim * pairs / (peak * a * isl / (isl + h))
    memory = batch * isl * head_dim * (4.0 * heads + 2.0 * kv_heads * kv_bytes) / (bw * e)
    return compute, memory, latency


def decode_attention(
    params: Params, bw: float, batch: Values, isl: Values, kv_heads: Values, head_dim: Values, kv_bytes: Values
) -> Array:
    e, latency, per_seq = params
    result: Array = np.asarray(
        latency + per_seq * batch + batch * isl * 2.0 * kv_heads * head_dim * kv_bytes / (bw * e)
    )
    return result


def moe(
    params: Params,
    peak: float,
    bw: float,
    tokens: Values,
    top_k: Values,
    hit: Values,
    hidden: Values,
    inter: Values,
    weight_bytes: float,
) -> Array:
    a, h, e, latency = params
    rows = tokens * top_k
    per_expert = rows / hit
    compute = 6.0 * rows * inter * hidden / (peak * a * per_expert / (per_expert + h))
    moved = 3.0 * hit * inter * hidden * weight_bytes + 2.0 * rows * (3.0 * hidden + 6.0 * inter)
    result: Array = np.maximum(compute, moved / (bw * e) + latency)
    return result


CUSTOM_ALLREDUCE_MAX_BYTES = 8 * 1024 * 1024


def allreduce(params: Params, ranks: Values, message_bytes: Values) -> Array:
    small_latency, small_bw, large_latency, large_bw = params
    is_small = message_bytes < CUSTOM_ALLREDUCE_MAX_BYTES
    latency = np.where(is_small, small_latency, large_latency)
    bus_bw = np.where(is_small, small_bw, large_bw)
    result: Array = latency + 2.0 * (ranks - 1) / ranks * message_bytes / bus_bw
    return result


@dataclass(frozen=True)
class CorrectionSpec:
    """Which log2 features an operator's correction sees and how they are grouped into terms."""

    features: tuple[str, ...]
    groups: tuple[tuple[int, ...], ...]
    max_knots: int = 8
    damping: float = 0.01


CORRECTIONS = {
    "gemm": CorrectionSpec(("m", "n", "k"), ((0, 1, 2),)),
    "prefill_attention": CorrectionSpec(("isl", "batch*heads", "heads/kv_heads", "head_dim"), ((0, 1, 2, 3),)),
    "decode_attention": CorrectionSpec(
        ("isl", "batch", "kv_heads*head_dim", "heads/kv_heads", "head_dim"),
        ((0, 1, 2), (0, 3, 4), (1, 3, 4), (0, 1, 3)),
    ),
    "allreduce": CorrectionSpec(("message_bytes",), ((0,),), max_knots=6, damping=0.1),
    "moe": CorrectionSpec(("tokens", "inter", "hidden", "experts/top_k"), ((0, 1, 2, 3),)),
}


def correction_features(op: str, columns: Mapping[str, Array]) -> Array:
    """The log2 features of CORRECTIONS[op] from shape columns (one row per kernel)."""

    def log2(name: str) -> Array:
        total = np.zeros(len(next(iter(columns.values()))))
        for part in name.split("*"):
            numerator, _, denominator = part.partition("/")
            total = total + np.log2(columns[numerator]) - (np.log2(columns[denominator]) if denominator else 0.0)
        return total

    return np.column_stack([log2(name) for name in CORRECTIONS[op].features])
