"""Fit the cost curves (curves.py) and their spline corrections (splines.py) to measured kernel times,
holding out every fifth shape.

First the curve's few parameters by least squares on log time (scipy; in log space so they stay positive),
then the correction on the log residual of the same rows. A fit records the shape range it saw; the report
compares held-out error with the uncalibrated roofline's, per curve and pooled per operator class.
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
HOLD_OUT_EVERY = 5
START = {
    "gemm": [0.7, 128.0, 0.8, 5e-6],
    "prefill_attention": [0.5, 512.0, 0.8, 1e-5],
    "decode_attention": [0.6, 5e-6, 1e-7],
    "allreduce": [1e-5, 1e11, 3e-5, 1e11],
    "moe": [0.6, 64.0, 0.8, 2e-5],
}


def held_out_mask(frame: pd.DataFrame) -> Array:
    """Every fifth row of the table in its original order is kept out of the fit."""
    return np.asarray(np.arange(len(frame)) % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1)


def _predictor(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str) -> Callable[[Array], Array]:
    col = {c: frame[c].to_numpy(dtype=np.float64) for c in frame.columns if c not in ("op", "dtype")}
    peak = float(getattr(hw.peak_flops, dtype) or hw.peak_flops.bf16) if op in ("gemm", "moe") else hw.peak_flops.bf16
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


def _columns(frame: pd.DataFrame) -> dict[str, Array]:
    return {c: frame[c].to_numpy(dtype=np.float64) for c in frame.columns if c not in ("op", "dtype", "source")}


def fit_correction(op: str, frame: pd.DataFrame, residual: Array) -> splines.Correction:
    spec = curves.CORRECTIONS[op]
    features = curves.correction_features(op, _columns(frame))
    return splines.fit_correction(features, residual, spec.groups, spec.max_knots, spec.damping)


def roofline_predict(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str) -> Array:
    """The uncalibrated model's time for each measured kernel."""
    costs = RooflineCosts(hw)
    out = []
    for row in frame.itertuples(index=False):
        r: Any = row
        if op == "gemm":
            out.append(costs.gemm_s(int(r.m), int(r.n), int(r.k), dtype, r.n * r.k * curves.WEIGHT_BYTES[dtype]))  # type: ignore[arg-type]
        elif op == "moe":
            weights = curves.WEIGHT_BYTES[dtype]
            experts = MoeShape(int(r.experts), int(r.top_k), int(r.hidden), int(r.inter), weights, dtype)  # type: ignore[arg-type]
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


def groups(table: pd.DataFrame) -> list[tuple[str, str, int | None, pd.DataFrame]]:
    """(op, dtype, GPU count for all-reduce, rows) groups that get one curve each."""
    out: list[tuple[str, str, int | None, pd.DataFrame]] = []
    for (op, dtype), frame in table.groupby(["op", "dtype"], sort=True):
        if op == "allreduce":
            for ranks in sorted(frame["ranks"].astype(int).unique()):
                rows = frame[frame["ranks"] == ranks].reset_index(drop=True)
                out.append((str(op), str(dtype), int(ranks), rows))
        else:
            out.append((str(op), str(dtype), None, frame.reset_index(drop=True)))
    return out


def shape_range(frame: pd.DataFrame) -> dict[str, list[float]]:
    return {
        c: [float(frame[c].min()), float(frame[c].max())] for c in frame.columns if c not in ("op", "dtype", "seconds")
    }


def calibrate(table: pd.DataFrame, hw: HardwareProfile) -> dict[str, Any]:
    """Fit every group on its non-held-out rows. Returns `fits` (curves, corrections, ranges, held-out
    errors per curve) and `classes` (held-out error pooled per operator class and dtype)."""
    fits: dict[str, Any] = {}
    pooled: dict[str, dict[str, list[Array]]] = {}
    for op, dtype, ranks, frame in groups(table):
        dropna = frame.dropna(axis=1, how="all")
        held = held_out_mask(dropna)
        train = dropna[np.logical_not(held)]
        params = fit_curve(op, train, hw, dtype)
        measured = dropna["seconds"].to_numpy()
        curve = predict(op, dropna, hw, dtype, params)
        correction = fit_correction(op, train, np.log(measured / curve)[np.logical_not(held)])
        fitted = curve * np.exp(correction(curves.correction_features(op, _columns(dropna))))
        errors = {
            "calibrated": _errors(fitted[held], measured[held]),
            "roofline": _errors(roofline_predict(op, dropna[held], hw, dtype), measured[held]),
        }
        for name, values in errors.items():
            pooled.setdefault(f"{op}/{dtype}", {}).setdefault(name, []).append(values)
        fits[f"{op}/{dtype}" + (f"/{ranks}" if ranks else "")] = {
            "op": op,
            "dtype": dtype,
            "ranks": ranks,
            "params": params,
            "correction": correction.to_json(),
            "range": shape_range(dropna),
            "points": len(dropna),
            "held_out": int(held.sum()),
            "held_out_ape": _quantiles(errors["calibrated"]),
            "roofline_ape": _quantiles(errors["roofline"]),
        }
    classes = {
        key: {"held_out": int(sum(len(e) for e in by_model["calibrated"]))}
        | {name: _quantiles(np.concatenate(parts)) for name, parts in by_model.items()}
        for key, by_model in sorted(pooled.items())
    }
    return {"fits": fits, "classes": classes}


def _errors(predicted: Array, measured: Array) -> Array:
    return np.asarray(np.abs(predicted - measured) / measured)


def _quantiles(errors: Array) -> dict[str, float]:
    return {"median": float(np.median(errors)), "p90": float(np.quantile(errors, 0.9))}
