"""Kernel costs from a fitted calibration (calibration/fits/<gpu>.json), falling back to the roofline.

Time = fitted curve x exp(spline correction) (curves.py, splines.py). An operator class without a fitted
curve (e.g. fp8 GEMMs on A100, all-reduce over a GPU count that was not measured) uses the roofline
default. A query outside the fitted shape range still gets the curve's value, with the correction held at
its boundary, but warns once per operator class.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

import numpy as np

from ttftsim.calibration import curves, splines
from ttftsim.config.dtypes import ComputeDtype
from ttftsim.config.hardware import HardwareProfile, Link
from ttftsim.data_paths import data_folder
from ttftsim.errors import CalibrationRangeWarning
from ttftsim.perf.kernels import AttentionShape, MoeShape, RooflineCosts

FITS_DIR = data_folder("calibration") / "fits"
Array = curves.Array


def fit_path(hardware_name: str) -> Path:
    return FITS_DIR / f"{hardware_name.lower()}.json"


def has_calibration(hardware_name: str) -> bool:
    return fit_path(hardware_name).exists()


@dataclass
class Calibration:
    """A calibration file's fits with their parsed corrections, and what the replicas built from it share:
    the correction tables built so far and the range warnings already given (once per file)."""

    fits: dict[str, Any]
    corrections: dict[str, splines.Correction]
    tables: dict[tuple[object, ...], splines.Table] = field(default_factory=dict)
    warned: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, fits: dict[str, Any]) -> Calibration:
        return cls(fits, {key: splines.Correction.from_json(fit.get("correction", [])) for key, fit in fits.items()})


_SHARED: list[Calibration] = []  # what _read made: the calibrations whose warnings forget_warnings clears


@lru_cache(maxsize=16)
def _read(path: str, mtime_ns: int) -> Calibration:
    """A calibration file, read once per process (per version of the file)."""
    calibration = Calibration.of(json.loads(Path(path).read_text(encoding="utf-8"))["fits"])
    _SHARED.append(calibration)
    return calibration


@lru_cache(maxsize=16)
def _with_lent(own: tuple[str, int], lender: tuple[str, int], classes: tuple[str, ...]) -> Calibration:
    """A calibration with the lender's curves of `classes` where its own has none of that class (HardwareProfile.
    curves_from: one compute die), read once per process (per version of the two files). The lent curves keep
    their fitted efficiencies and corrections, so the simulator evaluates them with the borrower's peaks."""
    fits = dict(_read(*own).fits)
    missing = set(classes) - {key.split("/")[0] for key in fits}  # classes this GPU has no curve of
    name = Path(lender[0]).name
    fits |= {key: fit | {"lent_from": name} for key, fit in _read(*lender).fits.items() if key.split("/")[0] in missing}
    calibration = Calibration.of(fits)
    _SHARED.append(calibration)
    return calibration


def forget_warnings() -> None:
    """Give the range warnings again, as if no replica had been built from the shared calibrations yet (a plan
    task's warnings are its own: a process runs many tasks)."""
    for calibration in _SHARED:
        calibration.warned.clear()


_log2: Final = math.log2  # read every decode step: a static, not the math module's attribute looked up each time


class DecodeLine:
    """A batch size's decode attention: fixed + per KV token seconds, and the correction over the mean context.
    Immutable (Final attributes); a plain compiled class, read every decode step (a tuple's floats are objects,
    unboxed at each read)."""

    def __init__(self, fixed_s: float, per_token_s: float, table: splines.Table) -> None:
        self.fixed_s: Final = fixed_s
        self.per_token_s: Final = per_token_s
        self.table: Final = table

    def __reduce__(self) -> tuple[type[DecodeLine], tuple[float, float, splines.Table]]:
        return (DecodeLine, (self.fixed_s, self.per_token_s, self.table))


class CalibratedCosts(RooflineCosts):
    """RooflineCosts whose operator classes use fitted curves where the calibration has them.

    Speed: results are memoised per shape (a model's few GEMM and attention shapes recur every
    iteration), and the correction is read from tables over the features that vary (splines.Table),
    built once per fixed part of the shape."""

    def __init__(
        self, hardware: HardwareProfile, fits: dict[str, Any], source: str, shared: Calibration | None = None
    ) -> None:
        super().__init__(hardware)
        self.calibration = shared if shared is not None else Calibration.of(fits)
        self.fits = fits
        self.source = source
        self._memo: dict[tuple[object, ...], float] = {}
        self._decode: dict[AttentionShape, dict[int, DecodeLine]] = {}
        # the decode lines of the shape read last: a model has one decode shape (two with MLA or sliding
        # windows), the same object every iteration; hashing the dataclass costs as much as the line itself
        self._decode_shape: AttentionShape | None = None
        self._decode_lines: dict[int, DecodeLine] = {}
        # the same for prefill attention: memoised per (tokens, query-key pairs, KV tokens) of each shape
        self._prefill: dict[AttentionShape, dict[tuple[int, int, int], float]] = {}
        self._prefill_shape: AttentionShape | None = None
        self._prefill_values: dict[tuple[int, int, int], float] = {}
        self._prefill_table: splines.Table | None = None  # its correction table (a miss of the values above reads it)
        self._extrapolated: dict[str, str] = {}  # each fit this replica read outside its range: the first such read

    @classmethod
    def load(cls, hardware: HardwareProfile) -> CalibratedCosts | None:
        path = fit_path(hardware.name)
        if not path.exists():
            return None
        calibration = _read(str(path), path.stat().st_mtime_ns)
        lent = hardware.curves_from
        lender = fit_path(lent.profile) if lent is not None else None
        if lent is not None and lender is not None and lender.exists():
            calibration = _with_lent(
                (str(path), path.stat().st_mtime_ns), (str(lender), lender.stat().st_mtime_ns), tuple(lent.classes)
            )
        return cls(hardware, calibration.fits, str(path), calibration)

    def _once(self, name: str, compute: Callable[..., float], *shape: Any) -> float:
        """compute(*shape), memoised per shape (a model's few shapes recur every iteration)."""
        memo = (name, *shape)
        value = self._memo.get(memo)
        if value is None:
            value = self._memo[memo] = compute(*shape)
        return value

    def _table(self, key: str, op: str, free: tuple[int, ...], fixed: dict[str, float]) -> splines.Table:
        """The correction factor over the `free` features, the shape's other columns at `fixed`."""
        memo = (key, free, *sorted(fixed.items()))
        tables = self.calibration.tables
        table = tables.get(memo)
        if table is None:
            point = curves.correction_features(op, {c: _a(v) for c, v in fixed.items()})[0]
            table = tables[memo] = self.calibration.corrections[key].tabulate(free, point)
        return table

    def _attention_table(self, key: str, op: str, shape: AttentionShape) -> splines.Table:
        """One table per attention shape over its first two features: context, and batch x heads (prefill)
        or batch (decode)."""
        fixed = {"isl": 1.0, "batch": 1.0, "heads": shape.q_heads, "kv_heads": shape.kv_heads}
        return self._table(key, op, (0, 1), fixed | {"head_dim": shape.head_dim})

    def _curve(self, key: str, shape: dict[str, float]) -> list[float] | None:
        fit = self.fits.get(key)
        if fit is None:
            return None
        for name, value in shape.items():
            low, high = fit["range"].get(name, (value, value))
            if low <= value <= high:
                continue
            if key not in self._extrapolated:  # the run's summary says it (extrapolated), naming the file as its
                # header does: the same bytes wherever the checkout lies
                meaning = curves.SHAPE_WORDS.get(name, name)
                source = fit.get("lent_from") or Path(self.source).name  # a lent curve's range is its lender's
                self._extrapolated[key] = (
                    f"{key}: {name}={value:g} ({meaning}) outside the calibrated range [{low:g}, {high:g}] "
                    f"({source}): the time there extrapolates the fitted curve"
                )
            if key not in self.calibration.warned:  # stderr says it once per process
                self.calibration.warned.add(key)
                warnings.warn(self._extrapolated[key], CalibrationRangeWarning, stacklevel=3)
        params: list[float] = fit["params"]
        return params

    def extrapolated(self) -> list[str]:
        return list(self._extrapolated.values())

    def gemm_s(self, m: int, n: int, k: int, dtype: ComputeDtype, weight_bytes: float) -> float:
        return self._once("gemm", self._gemm_s, m, n, k, dtype, weight_bytes)

    def _gemm_s(self, m: int, n: int, k: int, dtype: ComputeDtype, weight_bytes: float) -> float:
        key = f"gemm/{dtype}"
        fit = self.fits.get(key)
        widest = int(fit["range"].get("n", (0, n))[1]) if fit is not None else n
        if n > widest:  # wider than any measured GEMM (a 128k-vocabulary LM head): equal column blocks
            blocks = -(-n // widest)
            width = -(-n // blocks)
            return blocks * self.gemm_s(m, width, k, dtype, weight_bytes * width / n)
        params = self._curve(key, {"m": m, "n": n, "k": k}) if m > 0 else None
        if params is None:
            return super().gemm_s(m, n, k, dtype, weight_bytes)
        peak = float(getattr(self.hw.peak_flops, dtype) or self.hw.peak_flops.bf16)
        bytes_per_weight = weight_bytes / (n * k)
        curve = curves.gemm(params, peak, self.hw.mem_bw_bytes_per_s, m, n, k, bytes_per_weight)
        return float(curve) * self._table(key, "gemm", (0,), {"m": 1.0, "n": n, "k": k}).at(math.log2(m))

    def prefill_attention_s(self, tokens: int, pairs: int, kv_tokens: int, shape: AttentionShape) -> float:
        if tokens <= 0:  # a step without prefills (the roofline's answer, which _prefill_attention_s would give)
            return 0.0
        if shape is not self._prefill_shape:  # as the decode lines: the shape matched by identity, not hashed
            self._prefill_shape = shape
            self._prefill_values = self._prefill.setdefault(shape, {})
            self._prefill_table = None
        memo = (tokens, pairs, kv_tokens)
        value = self._prefill_values.get(memo)
        if value is None:
            value = self._prefill_values[memo] = self._prefill_attention_s(tokens, pairs, kv_tokens, shape)
        return value

    def _prefill_attention_s(self, tokens: int, pairs: int, kv_tokens: int, shape: AttentionShape) -> float:
        per_seq = 2.0 * pairs / tokens if tokens else 0.0  # pairs ~ s^2/2 per sequence of s tokens
        key = f"prefill_attention/{'fp8' if shape.kv_bytes == 1 else 'bf16'}"
        shape_range = {"isl": per_seq, "heads": shape.q_heads, "kv_heads": shape.kv_heads, "head_dim": shape.head_dim}
        params = self._curve(key, shape_range) if tokens else None
        if params is None:
            return super().prefill_attention_s(tokens, pairs, kv_tokens, shape)
        batch = tokens / per_seq
        curve = curves.prefill_attention_one(
            params,
            self.hw.peak_flops.bf16,
            self.hw.mem_bw_bytes_per_s,
            batch,
            per_seq,
            shape.q_heads,
            shape.kv_heads,
            shape.head_dim,
            shape.kv_bytes,
        )
        table = self._prefill_table  # (prefill_attention_s, the only caller, set this shape as the one read)
        if table is None:  # the shape's table, kept while it is the one read
            table = self._prefill_table = self._attention_table(key, "prefill_attention", shape)
        return curve * table.at2(math.log2(per_seq), math.log2(batch * shape.q_heads))

    def decode_attention_s(self, seqs: int, kv_tokens: int, shape: AttentionShape) -> float:
        if not seqs:
            return 0.0
        line = self._decode_line(seqs, shape)
        if line is None:
            return super().decode_attention_s(seqs, kv_tokens, shape)
        return (line.fixed_s + line.per_token_s * kv_tokens) * line.table.at(_log2(max(kv_tokens, 1) / seqs))

    def decode_attention_many_s(self, seqs: int, kv_tokens: Array, shape: AttentionShape) -> Array:
        line = self._decode_line(seqs, shape)
        if line is None:
            return super().decode_attention_many_s(seqs, kv_tokens, shape)
        fixed_s, per_token_s, table = line.fixed_s, line.per_token_s, line.table
        result: Array = (fixed_s + per_token_s * kv_tokens) * table.along(np.log2(np.maximum(kv_tokens, 1.0) / seqs))
        return result

    def _decode_line(self, seqs: int, shape: AttentionShape) -> DecodeLine | None:
        """For a batch of `seqs`: the curve's time as fixed + per KV token (it is linear in the batch's
        total context), and the correction over the mean context."""
        if shape is not self._decode_shape:  # read every iteration: the shape's lines, then the batch's
            self._decode_shape = shape
            self._decode_lines = self._decode.setdefault(shape, {})
        line = self._decode_lines.get(seqs)
        if line is None:
            key = f"decode_attention/{'fp8' if shape.kv_bytes == 1 else 'bf16'}"
            params = self._curve(key, {"batch": seqs, "kv_heads": shape.kv_heads, "head_dim": shape.head_dim})
            if params is None:
                return None
            efficiency, latency, per_seq = (float(p) for p in params)
            per_token = (
                2.0 * shape.kv_heads * shape.head_dim * shape.kv_bytes / (self.hw.mem_bw_bytes_per_s * efficiency)
            )
            table = self._attention_table(key, "decode_attention", shape).column(math.log2(seqs))
            line = self._decode_lines[seqs] = DecodeLine(latency + per_seq * seqs, per_token, table)
        return line

    def allreduce_s(self, message_bytes: float, ranks: int, link: Link) -> float:
        return self._once("allreduce", self._allreduce_s, message_bytes, ranks, link)

    def _allreduce_s(self, message_bytes: float, ranks: int, link: Link) -> float:
        key = f"allreduce/bf16/{ranks}"
        params = self._curve(key, {"message_bytes": message_bytes}) if ranks > 1 else None
        if params is None or link.kind == "network":
            return super().allreduce_s(message_bytes, ranks, link)
        curve = curves.allreduce(params, ranks, message_bytes)
        table = self._table(key, "allreduce", (0,), {"message_bytes": 1.0})
        return float(curve) * table.at(math.log2(max(message_bytes, 1.0)))

    def moe_s(self, tokens: int, hit: float, shape: MoeShape) -> float:
        return self._once("moe", self._moe_s, tokens, hit, shape)

    def _moe_s(self, tokens: int, hit: float, shape: MoeShape) -> float:
        key = moe_curve(shape)
        columns: dict[str, float] = {
            "inter": shape.inter,
            "hidden": shape.hidden,
            "experts": shape.num_experts,
            "top_k": shape.top_k,
        }
        params = self._curve(key, {"tokens": float(tokens)} | columns) if tokens > 0 else None
        if params is None:
            return super().moe_s(tokens, hit, shape)
        peak = float(getattr(self.hw.peak_flops, shape.dtype) or self.hw.peak_flops.bf16)
        curve = curves.moe(
            params,
            peak,
            self.hw.mem_bw_bytes_per_s,
            tokens,
            shape.top_k,
            hit,
            shape.hidden,
            shape.inter,
            shape.weight_bytes,
        )
        table = self._table(key, "moe", (0,), {"tokens": 1.0} | columns)
        return float(curve) * table.at(math.log2(tokens))


def moe_curve(shape: MoeShape) -> str:
    """The fitted curve of a MoE layer's kernel: 4-bit experts (int4, MXFP4: fewer than 8 bits a weight) run a
    weight-only kernel that multiplies in bf16, timed by the int4 curve with their own bytes (it is fitted to
    AIConfigurator's H100 table of SGLang's Marlin MoE kernel, the w4a16 kernel vLLM runs int4 experts with and
    MXFP4 ones on Ampere and Ada; on Hopper vLLM's MXFP4 default is Triton's matmul_ogs, another weight-only
    kernel); the others by their compute dtype's (bf16, fp8)."""
    return "moe/int4" if shape.weight_bytes < 1.0 else f"moe/{shape.dtype}"


def _a(value: float) -> Array:
    return np.asarray([value], dtype=np.float64)
