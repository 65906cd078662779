"""Held-out regions: whole blocks of shapes go to one split, tuning reads no test row, fits are deterministic."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from ttftsim.calibration import curves, regions, splines, tuning
from ttftsim.calibration.fit import calibrate
from ttftsim.hardware.catalog import load_hardware

HW = load_hardware("H100-SXM5-80GB")


def _frame(op: str, grid: dict[str, list[float]]) -> pd.DataFrame:
    rows = [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]
    return pd.DataFrame(rows).assign(op=op, dtype="bf16", seconds=1e-4)


TABLES = {
    "gemm": _frame("gemm", {"m": [1, 8, 64, 512], "n": [256, 1024, 4096, 8192], "k": [512, 2048, 4096, 14336]}),
    "prefill_attention": _frame(
        "prefill_attention",
        {"batch": [1, 4], "isl": [128, 1024], "heads": [8, 16, 32, 64], "kv_heads": [1, 4, 8], "head_dim": [64, 128]},
    ),
    "decode_attention": _frame(
        "decode_attention",
        {"batch": [1, 16], "isl": [64, 4096], "heads": [8, 32], "kv_heads": [1, 2, 8], "head_dim": [64, 128]},
    ),
    "moe": _frame(
        "moe",
        {"tokens": [1, 64, 1024], "experts": [8, 128], "top_k": [2, 8], "hidden": [2048, 4096], "inter": [256, 1024]},
    ),
    "allreduce": _frame("allreduce", {"ranks": [4], "message_bytes": [2.0**e for e in range(8, 31)]}),
}


@pytest.mark.parametrize("op", sorted(TABLES))
def test_each_block_of_shapes_lies_wholly_in_one_split(op: str) -> None:
    table = TABLES[op]
    split = regions.split_by_region(op, table)
    assert split is not None
    masks = np.column_stack([split.train, split.validation, split.test])
    assert (masks.sum(axis=1) == 1).all()  # each row in exactly one split
    assert split.blocks(split.test) >= 1 and split.blocks(split.validation) >= 1
    if op == "allreduce":  # one shape column: a test region is three consecutive octaves no fitted row is in
        octave = np.log2(table["message_bytes"].to_numpy()).astype(int) - 8
        bands = {o // 3 for o in octave[split.test]}
        assert set(octave[~split.test] // 3).isdisjoint(bands)
        assert sorted(octave[split.test]) == sorted(o for o in range(23) if o // 3 in bands)
        return
    keys = [tuple(row) for row in table[list(regions.BLOCK_COLUMNS[op])].to_numpy()]
    test_keys = {k for k, t in zip(keys, split.test, strict=True) if t}
    seen_keys = {k for k, t in zip(keys, split.test, strict=True) if not t}
    assert test_keys and test_keys.isdisjoint(seen_keys)
    validation_keys = {k for k, v in zip(keys, split.validation, strict=True) if v}
    train_keys = {k for k, t in zip(keys, split.train, strict=True) if t}
    assert validation_keys.isdisjoint(train_keys)


def test_the_split_follows_the_shapes_not_the_row_order() -> None:
    table = TABLES["gemm"]
    shuffled = table.sample(frac=1.0, random_state=3)
    first, moved = regions.split_by_region("gemm", table), regions.split_by_region("gemm", shuffled)
    assert first is not None and moved is not None
    key = ["n", "k"]
    assert set(map(tuple, table[first.test][key].to_numpy())) == set(map(tuple, shuffled[moved.test][key].to_numpy()))
    assert regions.split_by_region("gemm", table[(table["n"] == 256) & (table["k"] < 4096)]) is None  # 2 blocks


def _wavy_gemm() -> pd.DataFrame:
    """A GEMM table whose times are the curve times a wave the correction has to learn."""
    table = _frame(
        "gemm", {"m": [1, 4, 16, 64, 256, 1024], "n": [512, 1024, 2048, 4096, 8192], "k": [512, 1024, 2048, 4096, 8192]}
    )
    columns = {c: table[c].to_numpy(dtype=float) for c in ("m", "n", "k")}
    curve = curves.gemm([0.7, 150.0, 0.8, 5e-6], HW.peak_flops.bf16, HW.mem_bw_bytes_per_s, **columns, weight_bytes=2.0)
    wave = 0.15 * np.sin(np.log2(columns["n"]) * 1.3) * np.cos(np.log2(columns["m"]))
    return table.assign(seconds=curve * np.exp(wave))


def test_the_choice_of_settings_never_reads_the_test_rows() -> None:
    table = _wavy_gemm()
    split = regions.split_by_region("gemm", table)
    assert split is not None
    garbage = table.copy()
    rng = np.random.default_rng(0)
    garbage.loc[split.test, "seconds"] = rng.uniform(1e-9, 10.0, int(split.test.sum()))
    clean, noisy = (tuning.evaluate("gemm", t, HW, "bf16", split) for t in (table, garbage))
    assert clean.summary["settings"] == noisy.summary["settings"]
    for name in ("train", "validation"):
        assert np.array_equal(clean.errors[name], noisy.errors[name])
    assert not np.array_equal(clean.errors["test"], noisy.errors["test"])  # the test rows were read: after


def test_the_fit_and_its_report_are_deterministic() -> None:
    table = _wavy_gemm()
    first, second = (json.dumps(calibrate(table, HW), sort_keys=True) for _ in range(2))
    assert first == second
    result = json.loads(first)
    fit = result["fits"]["gemm/bf16"]
    assert fit["regions"]["points"]["test"] + fit["regions"]["points"]["validation"] < fit["points"]
    assert fit["regions"]["blocks"]["test"] == round(0.2 * 25)
    assert set(fit["ape"]) >= {"train", "validation", "test", "test_shipped_settings", "test_roofline", "neighbours"}


@pytest.mark.parametrize("rows", [400, 30])  # more rows than coefficients, and fewer (the dual form)
def test_the_direct_solve_matches_the_shipped_lsqr(rows: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(0.0, 10.0, (rows, 2))
    residual = 0.2 * np.sin(x[:, 0]) * np.cos(x[:, 1] / 2.0)
    direct = tuning.solve_corrections(x, residual, ((0, 1),), 6, (0.01,))[0]
    shipped = splines.fit_correction(x, residual, ((0, 1),), 6, 0.01)
    grid = rng.uniform(0.0, 10.0, (200, 2))
    assert np.allclose(direct(grid), shipped(grid), atol=1e-6)
