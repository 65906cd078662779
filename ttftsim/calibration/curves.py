"""The cost curves a calibration fits, one per operator class, shared by the fitter and the simulator.

Each is the roofline with its efficiencies as fitted functions of shape (P = dense peak, W = memory
bandwidth of the profile; every parameter is positive):
- gemm:              max(2mnk / (P a m/(m+h)), (weights + activations) / (W e) + L)
- prefill attention: max(4 H d pairs / (P a s/(s+h)), bytes / (W e)) + L, s = tokens per sequence
- decode attention:  L + c batch + KV bytes / (W e)
- all-reduce:        L_r + 2 (r-1)/r bytes / B_r, per GPU count r
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0}


def gemm(params: Array, peak: float, bw: float, m: Array, n: Array, k: Array, weight_bytes: float) -> Array:
    a, h, e, latency = params
    compute = 2.0 * m * n * k / (peak * a * m / (m + h))
    memory = (n * k * weight_bytes + 2.0 * m * (n + k)) / (bw * e) + latency
    result: Array = np.maximum(compute, memory)
    return result


def prefill_attention(
    params: Array,
    peak: float,
    bw: float,
    batch: Array,
    isl: Array,
    heads: Array,
    kv_heads: Array,
    head_dim: Array,
    kv_bytes: Array,
) -> Array:
    a, h, e, latency = params
    pairs = batch * isl * (isl + 1) / 2.0
    compute = 4.0 * heads * head_dim * pairs / (peak * a * isl / (isl + h))
    memory = batch * isl * head_dim * (4.0 * heads + 2.0 * kv_heads * kv_bytes) / (bw * e)
    result: Array = np.maximum(compute, memory) + latency
    return result


def decode_attention(
    params: Array, bw: float, batch: Array, isl: Array, kv_heads: Array, head_dim: Array, kv_bytes: Array
) -> Array:
    e, latency, per_seq = params
    result: Array = latency + per_seq * batch + batch * isl * 2.0 * kv_heads * head_dim * kv_bytes / (bw * e)
    return result


def allreduce(params: Array, ranks: Array, message_bytes: Array) -> Array:
    latency, bus_bw = params
    result: Array = latency + 2.0 * (ranks - 1) / ranks * message_bytes / bus_bw
    return result
