"""Kernel costs from a fitted calibration (calibration/fits/<gpu>.json), falling back to the roofline.

An operator class without a fitted curve (e.g. fp8 GEMMs on A100, all-reduce over a GPU count that was
not measured) uses the roofline default. A query outside the fitted shape range still gets the curve's
value (the curves are smooth roofline forms) but warns once per operator class.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ttftsim.calibration import curves
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

    @classmethod
    def load(cls, hardware: HardwareProfile) -> CalibratedCosts | None:
        path = fit_path(hardware.name)
        if not path.exists():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(hardware, data["fits"], str(path))

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
        params = self._curve(f"gemm/{dtype}", {"m": m, "n": n, "k": k}) if m > 0 else None
        if params is None:
            return super().gemm_s(m, n, k, dtype, weight_bytes)
        peak = float(getattr(self.hw.peak_flops, dtype) or self.hw.peak_flops.bf16)
        bytes_per_weight = weight_bytes / (n * k)
        return float(curves.gemm(params, peak, self.hw.mem_bw_bytes_per_s, _a(m), _a(n), _a(k), bytes_per_weight)[0])

    def prefill_attention_s(self, tokens: int, pairs: int, kv_tokens: int, shape: AttentionShape) -> float:
        per_seq = 2.0 * pairs / tokens if tokens else 0.0  # pairs ~ s^2/2 per sequence of s tokens
        key = f"prefill_attention/{'fp8' if shape.kv_bytes == 1 else 'bf16'}"
        params = self._curve(key, {"isl": per_seq}) if tokens else None
        if params is None:
            return super().prefill_attention_s(tokens, pairs, kv_tokens, shape)
        return float(
            curves.prefill_attention(
                params,
                self.hw.peak_flops.bf16,
                self.hw.mem_bw_bytes_per_s,
                _a(tokens / per_seq),
                _a(per_seq),
                _a(shape.q_heads),
                _a(shape.kv_heads),
                _a(shape.head_dim),
                _a(shape.kv_bytes),
            )[0]
        )

    def decode_attention_s(self, seqs: int, kv_tokens: int, shape: AttentionShape) -> float:
        return float(self.decode_attention_many_s(seqs, _a(kv_tokens), shape)[0]) if seqs else 0.0

    def decode_attention_many_s(self, seqs: int, kv_tokens: Array, shape: AttentionShape) -> Array:
        params = self._curve(f"decode_attention/{'fp8' if shape.kv_bytes == 1 else 'bf16'}", {})
        if params is None:
            return super().decode_attention_many_s(seqs, kv_tokens, shape)
        # the curve is linear in batch x context, so the batch's total context stands in for it
        return curves.decode_attention(
            params,
            self.hw.mem_bw_bytes_per_s,
            _a(seqs),
            kv_tokens / seqs,
            _a(shape.kv_heads),
            _a(shape.head_dim),
            _a(shape.kv_bytes),
        )

    def allreduce_s(self, message_bytes: float, ranks: int, link: Link) -> float:
        params = self._curve(f"allreduce/bf16/{ranks}", {"message_bytes": message_bytes}) if ranks > 1 else None
        if params is None or link.kind == "network":
            return super().allreduce_s(message_bytes, ranks, link)
        return float(curves.allreduce(params, _a(ranks), _a(message_bytes))[0])


def _a(value: float) -> Array:
    return np.asarray([value], dtype=np.float64)
