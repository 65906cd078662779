"""The device sweep's shape grid (what it will time), and `calibrate --device` refusing cleanly without a GPU."""

from __future__ import annotations

from calibration.sweep import TOKENS, attention_grid, gemm_grid
from tests.test_cli import _assert_one_line_error, run
from ttftsim.model.catalog import load_model, preset_names


def test_grid_covers_the_presets_layers_per_tp_slice() -> None:
    presets = [load_model(name) for name in preset_names()]
    shapes = gemm_grid(presets)
    keys = {(s.m, s.n, s.k) for s in shapes}
    assert len(keys) == len(shapes)  # no shape timed twice
    assert {s.m for s in shapes} == set(TOKENS)
    # Llama-3.1-8B: QKV 4096 -> (32 + 2 x 8) x 128 = 6144; MLP down 14336 -> 4096, TP 4 slices
    assert (4096, 6144, 4096) in keys and (1, 4096, 14336 // 4) in keys and (16384, 2 * 14336 // 8, 4096) in keys
    heads = attention_grid(presets)
    assert {"q_heads": 32, "kv_heads": 8, "head_dim": 128} in heads  # 8B, TP 1
    assert {"q_heads": 8, "kv_heads": 2, "head_dim": 128} in heads  # 8B and 70B, TP 4 / TP 8


def test_device_sweep_needs_a_gpu_and_one_source() -> None:
    result = run("calibrate", "--device")
    _assert_one_line_error(result, "--device")
    assert "no CUDA GPU" in result.stderr or "torch is not installed" in result.stderr
    _assert_one_line_error(run("calibrate"), "exactly one of --from TABLES or --device")


def test_the_h100_sweep_against_the_shipped_calibration() -> None:
    """benchmarks/device_sweep_check.py on the committed H100 sweep: every GEMM row is compared, and the
    large-m rows (compute-bound, where the tables' method and the sweep's agree) are within 10% median."""
    import importlib.util
    import json
    from pathlib import Path

    import numpy as np

    from ttftsim.hardware.catalog import load_hardware

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("device_sweep_check", root / "benchmarks" / "device_sweep_check.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    results = json.loads((root / "calibration/results/nvidia-h100-80gb-hbm3.json").read_text(encoding="utf-8"))
    rows = check.gemm_rows(results["gemm"], load_hardware("H100-SXM5-80GB"))
    assert len(rows) == 483
    large = [abs(row["calibrated"]) for row in rows if row["m"] >= 1024]
    assert len(large) == 207 and float(np.median(large)) < 10.0
