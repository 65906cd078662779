"""The device sweep's measurements (calibration/results/<gpu>.json, timed on a real GPU by
`ttftsim calibrate --device`) against what ttftsim predicts for the same kernels on that GPU: the shipped
calibration (curves fitted to AIConfigurator's tables, measured on other machines with other library
versions) and the plain roofline. Nothing here is fitted: it is an out-of-sample check of the kernel costs.

- GEMM: torch.matmul (cuBLAS, bf16) per shape, against `gemm_s`; grouped by token count m (decode-sized m
  are bandwidth-bound, prefill-sized compute-bound). Where the sweep also timed it as the tables were (six weight
  copies in a CUDA graph, `torch_graph_s`: sweeps from 2026-12-05's fifth session on), that column too.
- Prefill attention: our Triton kernel (FlashAttention-style, not the engine's FA3), one causal sequence,
  against `prefill_attention_s`: how far a plain fused kernel is from the engine's.
- Copy bandwidth and matmul peak against the profile's datasheet figures and efficiencies.

    python benchmarks/device_sweep_check.py [--results calibration/results/nvidia-h100-80gb-hbm3.json]
        [--hardware H100-SXM5-80GB]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
M_BANDS = ((1, 16), (64, 256), (1024, 4096), (16384, 16384))


def _error_pct(predicted: float, measured: float) -> float:
    return 100.0 * (predicted - measured) / measured


def gemm_rows(rows: list[dict[str, Any]], hardware: Any, column: str = "torch_s") -> list[dict[str, float]]:
    from ttftsim.calibration.costs import CalibratedCosts
    from ttftsim.perf.kernels import RooflineCosts

    calibrated, roofline = CalibratedCosts.load(hardware), RooflineCosts(hardware)
    assert calibrated is not None, f"no shipped calibration for {hardware.name}"
    out = []
    for row in rows:
        if column not in row:
            continue
        m, n, k = row["m"], row["n"], row["k"]
        weight_bytes = 2.0 * n * k
        out.append(
            {
                "m": m,
                "measured_s": row[column],
                "calibrated": _error_pct(calibrated.gemm_s(m, n, k, "bf16", weight_bytes), row[column]),
                "roofline": _error_pct(roofline.gemm_s(m, n, k, "bf16", weight_bytes), row[column]),
            }
        )
    return out


def prefill_rows(rows: list[dict[str, Any]], hardware: Any) -> list[dict[str, float]]:
    from ttftsim.calibration.costs import CalibratedCosts
    from ttftsim.perf.kernels import AttentionShape, RooflineCosts

    calibrated, roofline = CalibratedCosts.load(hardware), RooflineCosts(hardware)
    assert calibrated is not None
    out = []
    for row in rows:
        if "triton_s" not in row:
            continue
        tokens = row["tokens"]
        shape = AttentionShape(row["q_heads"], row["kv_heads"], row["head_dim"], kv_bytes=2)
        pairs = tokens * (tokens + 1) // 2
        out.append(
            {
                "tokens": tokens,
                "measured_s": row["triton_s"],
                "calibrated": _error_pct(calibrated.prefill_attention_s(tokens, pairs, tokens, shape), row["triton_s"]),
                "roofline": _error_pct(roofline.prefill_attention_s(tokens, pairs, tokens, shape), row["triton_s"]),
            }
        )
    return out


def _summary(rows: list[dict[str, float]], label: str) -> str:
    calibrated = np.array([r["calibrated"] for r in rows])
    roofline = np.array([r["roofline"] for r in rows])
    return (
        f"| {label} | {len(rows)} | {np.median(np.abs(calibrated)):.1f}% ({np.median(calibrated):+.1f}%) | "
        f"{np.percentile(np.abs(calibrated), 90):.1f}% | {np.median(np.abs(roofline)):.1f}% "
        f"({np.median(roofline):+.1f}%) |"
    )


def report(results: dict[str, Any], hardware: Any) -> list[str]:
    lines = [
        f"{results['device']} (torch {results['torch']}, CUDA {results['cuda']}, triton {results['triton']}), "
        f"against {hardware.name}",
        f"copy {results['copy_bytes_per_s'] / 1e12:.2f} TB/s counting read + write (profile: "
        f"{hardware.mem_bw_bytes_per_s / 1e12:.2f} TB/s x {hardware.roofline.mem_bw_efficiency} efficiency = "
        f"{hardware.mem_bw_bytes_per_s * hardware.roofline.mem_bw_efficiency / 1e12:.2f}); bf16 matmul "
        f"{results['matmul_peak_flops'] / 1e12:.0f} TFLOP/s at 8192^3 (profile peak "
        f"{hardware.peak_flops.bf16 / 1e12:.0f} x {hardware.roofline.gemm_max_efficiency} = "
        f"{hardware.peak_flops.bf16 * hardware.roofline.gemm_max_efficiency / 1e12:.0f})",
        f"kernel checks against torch references (max abs error, bf16): {results['checks']}",
        "",
        "| kernels | shapes | calibrated: median abs error (signed) | P90 abs | roofline: median abs (signed) |",
        "|---|---|---|---|---|",
    ]
    for column, how in (("torch_s", "cuBLAS after an L2 flush"), ("torch_graph_s", "cuBLAS, 6 copies in a CUDA graph")):
        gemms = gemm_rows(results.get("gemm", []), hardware, column)
        if not gemms:
            continue
        lines.append(_summary(gemms, f"GEMM, {how}, all"))
        for low, high in M_BANDS:
            band = [r for r in gemms if low <= r["m"] <= high]
            if band:
                lines.append(_summary(band, f"GEMM, {how}, m {low}-{high}"))
    prefills = prefill_rows(results.get("prefill_attention", []), hardware)
    if prefills:
        lines.append(_summary(prefills, "prefill attention, our Triton kernel"))
    return lines


def main(argv: list[str]) -> int:
    from ttftsim.hardware.catalog import load_hardware

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "calibration/results/nvidia-h100-80gb-hbm3.json")
    parser.add_argument("--hardware", default="H100-SXM5-80GB")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text(encoding="utf-8"))
    print("\n".join(report(results, load_hardware(args.hardware))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
