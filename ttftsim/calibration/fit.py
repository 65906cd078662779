"""Fit every operator class of a GPU's kernel tables (curve_fit.py) and measure how well the fits predict.

Two things per curve:
- the shipped fit, what the simulator reads: fitted on every row but every fifth of the table, with the
  settings in curves.CORRECTIONS. Its error on those fifth rows ("neighbours": each lies between fitted
  rows of the same sweep) is kept for comparison with earlier reports; it is optimistic.
- the region evaluation (regions.py, tuning.py): whole blocks of shapes held out, the spline's settings
  chosen on validation blocks, the error reported on test blocks that nothing was fitted or tuned on.

`calibrate` does both; `assess` only the second and the neighbour errors, for curves already fitted
(calibration/assess.py re-measures the shipped files without moving their curves). Errors are pooled per
operator class (all-reduce over its GPU counts), next to the uncalibrated roofline's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ttftsim.calibration import curve_fit, regions, splines, tuning
from ttftsim.config.hardware import HardwareProfile

Array = curve_fit.Array
Errors = dict[str, Array]  # absolute percentage errors per set of rows
HOLD_OUT_EVERY = 5
SHIPPED = ("op", "dtype", "ranks", "params", "correction", "range", "points")  # what the simulator reads
ASSESSMENT = {
    "shipped_fit": f"every row but every {HOLD_OUT_EVERY}th of each table; knots and damping of curves.CORRECTIONS",
    "held_out": regions.BLOCK_MEANING,
    "split": f"blocks dealt 3:1:1 to train, validation, test in an order shuffled with seed {regions.SEED}",
    "tuned": f"max_knots in {list(tuning.KNOTS)} x damping in {list(tuning.DAMPINGS)}: fitted on train, "
    "chosen on validation (median + P90 APE), refitted on train + validation, scored on test",
}


def held_out_mask(frame: pd.DataFrame) -> Array:
    """Every fifth row of the table in its original order is kept out of the shipped fit."""
    return np.asarray(np.arange(len(frame)) % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1)


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


def shipped_fit(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str) -> dict[str, Any]:
    """The curve the simulator reads: fitted on every row but every fifth, with the shipped settings."""
    held = held_out_mask(frame)
    train = frame[np.logical_not(held)]
    params = curve_fit.fit_curve(op, train, hw, dtype)
    curve = curve_fit.predict(op, frame, hw, dtype, params)
    residual = np.log(frame["seconds"].to_numpy() / curve)[np.logical_not(held)]
    return {
        "params": params,
        "correction": curve_fit.fit_correction(op, train, residual).to_json(),
        "settings": tuning.Settings.shipped(op).to_json(),
        "range": shape_range(frame),
        "points": len(frame),
    }


def neighbour_errors(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str, fit: dict[str, Any]) -> Errors:
    """A shipped curve's errors (as written, coefficients rounded) on the every-fifth rows it was not fitted on,
    and the roofline's there."""
    rows = frame[held_out_mask(frame)]
    measured = rows["seconds"].to_numpy()
    model = tuning.Model(fit["params"], splines.Correction.from_json(fit["correction"]))
    return {
        "neighbours": curve_fit.ape(model.predict(op, rows, hw, dtype), measured),
        "neighbours_roofline": curve_fit.ape(curve_fit.roofline_predict(op, rows, hw, dtype), measured),
    }


def region_report(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str) -> tuning.Scored:
    """The region evaluation's settings, counts and errors; empty when the table has under three blocks."""
    split = regions.split_by_region(op, frame)
    if split is None:
        return tuning.Scored({}, {})
    result = tuning.evaluate(op, frame, hw, dtype, split)
    return tuning.Scored({"held_out": regions.BLOCK_MEANING[op], **result.summary}, result.errors)


def _key(op: str, dtype: str, ranks: int | None) -> str:
    return f"{op}/{dtype}" + (f"/{ranks}" if ranks else "")


def calibrate(table: pd.DataFrame, hw: HardwareProfile, evaluate: bool = True) -> dict[str, Any]:
    """Fit every group's shipped curve, then (unless `evaluate` is False: the region evaluation is the slow
    part, a grid of settings per curve) measure them with `assess`."""
    fits = {
        _key(op, dtype, ranks): {"op": op, "dtype": dtype, "ranks": ranks}
        | shipped_fit(op, frame.dropna(axis=1, how="all"), hw, dtype)
        for op, dtype, ranks, frame in groups(table)
    }
    return assess(table, hw, fits) if evaluate else {"fits": fits}


def assess(table: pd.DataFrame, hw: HardwareProfile, fits: dict[str, Any]) -> dict[str, Any]:
    """Errors of a calibration's curves against the table, the curves left as they are (a fresh fit's, or a
    file's: lsqr's last digits vary from machine to machine, and re-measuring should not move predictions).
    Returns `fits` (each curve with its `regions` evaluation and `ape`: quantiles per set of rows),
    `classes` (the same pooled per operator class and dtype) and `assessment` (what was held out, what tuned)."""
    out = dict(fits)  # a curve the table has no rows for stays as it is
    pooled: dict[str, dict[str, list[Array]]] = {}
    for op, dtype, ranks, frame in groups(table):
        key = _key(op, dtype, ranks)
        if key not in fits:
            continue
        dropna = frame.dropna(axis=1, how="all")
        report = region_report(op, dropna, hw, dtype)
        errors = neighbour_errors(op, dropna, hw, dtype, fits[key]) | report.errors
        for name, values in errors.items():
            pooled.setdefault(f"{op}/{dtype}", {}).setdefault(name, []).append(values)
        out[key] = {name: fits[key][name] for name in SHIPPED if name in fits[key]} | {
            "settings": fits[key].get("settings", tuning.Settings.shipped(op).to_json()),
            "neighbours": int(held_out_mask(dropna).sum()),
            "regions": report.summary,
            "ape": {name: curve_fit.quantiles(values) for name, values in errors.items()},
        }
    classes = {
        key: {
            "points": {name: int(sum(len(e) for e in parts)) for name, parts in by_rows.items()},
            "ape": {name: curve_fit.quantiles(np.concatenate(parts)) for name, parts in by_rows.items()},
        }
        for key, by_rows in sorted(pooled.items())
    }
    return {"fits": out, "classes": classes, "assessment": ASSESSMENT}
