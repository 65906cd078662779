"""Fit one cost curve (curves.py) and its spline correction (splines.py) to measured kernel rows, and
score predictions against the measurements.

The curve's few parameters by least squares on log time (scipy; in log space so they stay positive), then
the correction on the log residual of the same rows. The uncalibrated roofline's time for each measured
kernel is here too, as the baseline every error is compared with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from ttftsim.calibration import curves, splines
from ttftsim.config.hardware import HardwareProfile, Link
from ttftsim.perf.kernels import AttentionShape, MoeShape, RooflineCosts

Array = curves.Array
START = {
    "gemm": [0.7, 128.0, 0.8, 5e-6],
    "prefill_attention": [0.5, 512.0, 0.8, 1e-5],
    "decode_attention": [0.6, 5e-6, 1e-7],
    "allreduce": [1e-5, 1e11, 3e-5, 1e11],
    "moe": [0.6, 64.0, 0.8, 2e-5],
}


def _predictor(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str) -> Callable[[Array], Array]:
    col = {c: frame[c].to_numpy(dtype=np.float64) for c in frame.columns if c not in ("op", "dtype")}
    own = getattr(hw.peak_flops, dtype, None) if op in ("gemm", "moe") else None  # int4 weights multiply in bf16
    peak = float(own or hw.peak_flops.bf16)
    bw = hw.mem_bw_bytes_per_s
    if op == "gemm":
        return lambda p: curves.gemm(p, peak, bw, col["m"], col["n"], col["k"], curves.WEIGHT_BYTES[dtype])
    if op == "moe":
        return lambda p: curves.moe(
            p,
            peak,
            bw,
            col["tokens"],
            col["top_k"],
            col["hit"],
            col["hidden"],
            col["inter"],
            curves.WEIGHT_BYTES[dtype],
        )
    if op == "prefill_attention":
        return lambda p: curves.prefill_attention(
            p, peak, bw, col["batch"], col["isl"], col["heads"], col["kv_heads"], col["head_dim"], col["kv_bytes"]
        )
    if op == "decode_attention":
        return lambda p: curves.decode_attention(
            p, bw, col["batch"], col["isl"], col["kv_heads"], col["head_dim"], col["kv_bytes"]
        )
    return lambda p: curves.allreduce(p, col["ranks"], col["message_bytes"])


def fit_curve(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str) -> list[float]:
    measured = np.log(frame["seconds"].to_numpy(dtype=np.float64))
    predict = _predictor(op, frame, hw, dtype)
    result = least_squares(lambda x: np.log(predict(np.exp(x))) - measured, np.log(START[op]), method="trf")
    return [float(v) for v in np.exp(result.x)]


def predict(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str, params: list[float]) -> Array:
    return _predictor(op, frame, hw, dtype)(np.asarray(params))


def columns(frame: pd.DataFrame) -> dict[str, Array]:
    return {c: frame[c].to_numpy(dtype=np.float64) for c in frame.columns if c not in ("op", "dtype", "source")}


def features(op: str, frame: pd.DataFrame) -> Array:
    """The correction's log2 features of each row."""
    return curves.correction_features(op, columns(frame))


def fit_correction(op: str, frame: pd.DataFrame, residual: Array) -> splines.Correction:
    """The shipped correction: CORRECTIONS[op]'s knots and damping, solved by lsqr."""
    spec = curves.CORRECTIONS[op]
    return splines.fit_correction(features(op, frame), residual, spec.groups, spec.max_knots, spec.damping)


def roofline_predict(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str) -> Array:
    """The uncalibrated model's time for each measured kernel."""
    costs = RooflineCosts(hw)
    out = []
    for row in frame.itertuples(index=False):
        r: Any = row
        if op == "gemm":
            out.append(costs.gemm_s(int(r.m), int(r.n), int(r.k), dtype, r.n * r.k * curves.WEIGHT_BYTES[dtype]))  # type: ignore[arg-type]
        elif op == "moe":
            weights, compute = curves.WEIGHT_BYTES[dtype], "bf16" if dtype == "int4" else dtype  # w4a16: bf16 math
            experts = MoeShape(int(r.experts), int(r.top_k), int(r.hidden), int(r.inter), weights, compute)  # type: ignore[arg-type]
            out.append(costs.moe_s(int(r.tokens), float(r.hit), experts))
        elif op in ("prefill_attention", "decode_attention"):
            shape = AttentionShape(int(r.heads), int(r.kv_heads), int(r.head_dim), int(r.kv_bytes))
            tokens = int(r.batch * r.isl)
            if op == "prefill_attention":
                out.append(costs.prefill_attention_s(tokens, int(r.batch * r.isl * (r.isl + 1) // 2), tokens, shape))
            else:
                out.append(costs.decode_attention_s(int(r.batch), tokens, shape))
        else:
            link: Link = hw.intra_node_link
            out.append(costs.allreduce_s(float(r.message_bytes), int(r.ranks), link))
    return np.asarray(out, dtype=np.float64)


def ape(predicted: Array, measured: Array) -> Array:
    """Absolute percentage error of each prediction (as a fraction)."""
    return np.asarray(np.abs(predicted - measured) / measured)


def quantiles(errors: Array) -> dict[str, float]:
    return {"median": float(np.median(errors)), "p90": float(np.quantile(errors, 0.9))}
