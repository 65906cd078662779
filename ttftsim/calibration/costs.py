"""Kernel costs from a fitted calibration (calibration/fits/<gpu>.json), falling back to the roofline.

Time = fitted curve x exp(spline correction) (curves.py, splines.py). An operator class without a fitted
curve (e.g. fp8 GEMMs on A100, all-reduce over a GPU count that was not measured) uses the roofline
default. A query outside the fitted shape range still gets the curve's value, with the correction held at
its boundary, but warns once per operator class.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ttftsim.calibration import curves, splines
from ttftsim.config.dtypes import ComputeDtype
from ttftsim.config.hardware import HardwareProfile, Link
from ttftsim.perf.kernels import AttentionShape, RooflineCosts

FITS_DIR = Path(__file__).resolve().parents[2] / "calibration" / "fits"
Array = curves.Array


def fit_path(hardware_name: str) -> Path:
    return FITS_DIR / f"{hardware_name.lower()}.json"


class CalibratedCosts(RooflineCosts):
    """RooflineCosts whose operator classes use fitted curves where the calibration has them."""

    def __init__(self, hardware: HardwareProfile, fits: dict[str, Any], source: str) -> None:
        super().__init__(hardware)
        self.fits = fits
        self.source = source
        self._warned: set[str] = set()
        self._corrections = {key: splines.Correction.from_json(fit.get("correction", [])) for key, fit in fits.items()}
        self._memo: dict[tuple[object, ...], float] = {}  # a model's few shapes recur every iteration
        self._decode_lines: dict[tuple[str, int, AttentionShape], Callable[[Array], Array]] = {}

    @classmethod
    def load(cls, hardware: HardwareProfile) -> CalibratedCosts | None:
        path = fit_path(hardware.name)
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(hardware, data["fits"], str(path))

    def _corrected(self, key: str, op: str, curve: Array, columns: dict[str, Array]) -> Array:
        correction = self._corrections[key](curves.correction_features(op, columns))
        result: Array = curve * np.exp(correction)
        return result

    def _curve(self, key: str, shape: dict[str, float]) -> np.ndarray | None:
        fit = self.fits.get(key)
        if fit is None:
            return None
        for name, value in shape.items():
            low, high = fit["range"].get(name, (value, value))
            if not low <= value <= high and key not in self._warned:
                self._warned.add(key)
                warnings.warn(
                    f"{key}: {name}={value:g} outside the calibrated range [{low:g}, {high:g}] ({self.source})",
                    stacklevel=3,
                )
        return np.asarray(fit["params"])

    def gemm_s(self, m: int, n: int, k: int, dtype: ComputeDtype, weight_bytes: float) -> float:
        memo = ("gemm", m, n, k, dtype, weight_bytes)
        if memo not in self._memo:
            self._memo[memo] = self._gemm_s(m, n, k, dtype, weight_bytes)
        return self._memo[memo]

    def _gemm_s(self, m: int, n: int, k: int, dtype: ComputeDtype, weight_bytes: float) -> float:
        key = f"gemm/{dtype}"
        params = self._curve(key, {"m": m, "n": n, "k": k}) if m > 0 else None
        if params is None:
            return super().gemm_s(m, n, k, dtype, weight_bytes)
        peak = float(getattr(self.hw.peak_flops, dtype) or self.hw.peak_flops.bf16)
        bytes_per_weight = weight_bytes / (n * k)
        curve = curves.gemm(params, peak, self.hw.mem_bw_bytes_per_s, _a(m), _a(n), _a(k), bytes_per_weight)
        return float(self._corrected(key, "gemm", curve, {"m": _a(m), "n": _a(n), "k": _a(k)})[0])

    def prefill_attention_s(self, tokens: int, pairs: int, kv_tokens: int, shape: AttentionShape) -> float:
        memo = ("prefill", tokens, pairs, kv_tokens, shape)
        if memo not in self._memo:
            self._memo[memo] = self._prefill_attention_s(tokens, pairs, kv_tokens, shape)
        return self._memo[memo]

    def _prefill_attention_s(self, tokens: int, pairs: int, kv_tokens: int, shape: AttentionShape) -> float:
        per_seq = 2.0 * pairs / tokens if tokens else 0.0  # pairs ~ s^2/2 per sequence of s tokens
        key = f"prefill_attention/{'fp8' if shape.kv_bytes == 1 else 'bf16'}"
        params = self._curve(key, {"isl": per_seq}) if tokens else None
        if params is None:
            return super().prefill_attention_s(tokens, pairs, kv_tokens, shape)
        columns = {
            "batch": _a(tokens / per_seq),
            "isl": _a(per_seq),
            "heads": _a(shape.q_heads),
            "kv_heads": _a(shape.kv_heads),
            "head_dim": _a(shape.head_dim),
            "kv_bytes": _a(shape.kv_bytes),
        }
        curve = curves.prefill_attention(params, self.hw.peak_flops.bf16, self.hw.mem_bw_bytes_per_s, **columns)
        return float(self._corrected(key, "prefill_attention", curve, columns)[0])

    def decode_attention_s(self, seqs: int, kv_tokens: int, shape: AttentionShape) -> float:
        return float(self.decode_attention_many_s(seqs, _a(kv_tokens), shape)[0]) if seqs else 0.0

    def decode_attention_many_s(self, seqs: int, kv_tokens: Array, shape: AttentionShape) -> Array:
        key = f"decode_attention/{'fp8' if shape.kv_bytes == 1 else 'bf16'}"
        params = self._curve(key, {"batch": seqs, "isl": float(np.max(kv_tokens)) / seqs})
        if params is None:
            return super().decode_attention_many_s(seqs, kv_tokens, shape)
        # the batch's mean context stands in for each sequence's (the curve is linear in batch x context)
        size = len(kv_tokens)
        columns = {
            "batch": np.full(size, float(seqs)),
            "isl": kv_tokens / seqs,
            "heads": np.full(size, float(shape.q_heads)),
            "kv_heads": np.full(size, float(shape.kv_heads)),
            "head_dim": np.full(size, float(shape.head_dim)),
            "kv_bytes": np.full(size, float(shape.kv_bytes)),
        }
        curve = curves.decode_attention(
            params,
            self.hw.mem_bw_bytes_per_s,
            *(columns[c] for c in ("batch", "isl", "kv_heads", "head_dim", "kv_bytes")),
        )
        line = self._decode_lines.get((key, seqs, shape))
        if line is None:  # only the context varies along a decode run: the correction as a 1-D spline of it
            point = curves.correction_features("decode_attention", {c: v[:1] for c, v in columns.items()})[0]
            line = self._decode_lines[key, seqs, shape] = self._corrections[key].along(0, point)
        result: Array = curve * np.exp(line(np.log2(columns["isl"])))
        return result

    def allreduce_s(self, message_bytes: float, ranks: int, link: Link) -> float:
        memo = ("allreduce", message_bytes, ranks, link)
        if memo not in self._memo:
            self._memo[memo] = self._allreduce_s(message_bytes, ranks, link)
        return self._memo[memo]

    def _allreduce_s(self, message_bytes: float, ranks: int, link: Link) -> float:
        key = f"allreduce/bf16/{ranks}"
        params = self._curve(key, {"message_bytes": message_bytes}) if ranks > 1 else None
        if params is None or link.kind == "network":
            return super().allreduce_s(message_bytes, ranks, link)
        curve = curves.allreduce(params, _a(ranks), _a(message_bytes))
        return float(self._corrected(key, "allreduce", curve, {"message_bytes": _a(message_bytes)})[0])


def _a(value: float) -> Array:
    return np.asarray([value], dtype=np.float64)
