"""The GEMM tables' two populations: token counts m that are multiples of 16 and the same plus one.

AIConfigurator's GEMM sweeps time most token counts twice, at m and at m + 1 (16 and 17, ..., 4,096 and
4,097). For bf16 the two cost about the same; for per-tensor fp8 on H100 (vLLM's CUTLASS scaled-mm) the +1
rows are up to 2.7x slower (n 8,192, k 7,168: 33 us at m 256, 90 us at 257, 48 us at 512). The shipped
calibration (one smooth correction over log m, n, k) sits between the two populations, so against the
aligned rows alone it over-predicts and against the +1 rows it under-predicts. This prints, per GPU and
dtype, on LLM-sized weights (n and k from 1,024 to 32,768, m from 64 to 16,384):

- the measured ratio t(m + 1) / t(m) per band of m (median over the weight shapes);
- the shipped curve's signed median error and P90 absolute error on each population;
- with --refit: the same for a correction that also sees whether m is a multiple of 16 (a fourth feature,
  fitted as the shipped one is, on every row but every fifth; errors on all rows and on the every-fifth rows
  it did not see). Evidence, not shipped: which population an engine's token count belongs to when it is
  neither (a prefill of 1,000 tokens) is not in the tables.

    python benchmarks/gemm_alignment.py [--refit] [--tables ../shared/data/kernels/aiconfigurator]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
BANDS = ((64, 255), (256, 1023), (1024, 4095), (4096, 16384))
LLM = {"n": (1024, 32768), "k": (1024, 32768), "m": (64, 16385)}


def llm_rows(frame: pd.DataFrame) -> pd.DataFrame:
    keep = np.ones(len(frame), dtype=bool)
    for column, (low, high) in LLM.items():
        keep &= (frame[column] >= low).to_numpy() & (frame[column] <= high).to_numpy()
    return frame[keep]


def ratios(rows: pd.DataFrame) -> list[str]:
    """Median t(m + 1) / t(m) per band, over weight shapes that have both rows."""
    seconds = rows.set_index(["n", "k", "m"])["seconds"]
    aligned = rows[rows["m"] % 16 == 0]
    out = []
    for low, high in BANDS:
        band = aligned[(aligned["m"] >= low) & (aligned["m"] <= high)]
        pairs = [
            seconds[(n, k, m + 1)] / seconds[(n, k, m)]
            for n, k, m in zip(band["n"], band["k"], band["m"], strict=True)
            if (n, k, m + 1) in seconds.index
        ]
        out.append(f"{np.median(pairs):.2f}x ({len(pairs)})" if pairs else "-")
    return out


def errors(predicted: np.ndarray, measured: np.ndarray, mask: np.ndarray) -> str:
    if not mask.any():
        return "-"
    signed = predicted[mask] / measured[mask] - 1.0
    return f"{np.median(signed) * 100:+.1f}% / {np.quantile(np.abs(signed), 0.9) * 100:.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=Path, default=ROOT.parent / "shared/data/kernels/aiconfigurator")
    parser.add_argument("--refit", action="store_true", help="also fit a correction that sees m's alignment")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from ttftsim.calibration import curve_fit, curves, splines, tuning
    from ttftsim.calibration.costs import fit_path
    from ttftsim.calibration.fit import held_out_mask
    from ttftsim.calibration.tables import import_aiconfigurator
    from ttftsim.hardware.catalog import load_hardware

    if not args.tables.is_dir():
        print(f"{args.tables}: not a folder (the kernel tables of ../shared/data/kernels/aiconfigurator)")
        return 2
    print("GPU | dtype | t(m+1)/t(m), m in " + " | ".join(f"{a}-{b}" for a, b in BANDS))
    findings = []
    for gpu, table in sorted(import_aiconfigurator(args.tables).items()):
        path = fit_path(gpu)
        if not path.exists():
            continue
        fits = json.loads(path.read_text(encoding="utf-8"))["fits"]
        hw = load_hardware(gpu)
        for dtype in ("bf16", "fp8"):
            key = f"gemm/{dtype}"
            frame = table[(table["op"] == "gemm") & (table["dtype"] == dtype)].dropna(axis=1, how="all")
            if key not in fits or frame.empty:
                continue
            frame = frame.reset_index(drop=True)
            print(f"{gpu} | {dtype} | " + " | ".join(ratios(llm_rows(frame))))
            shipped = tuning.Model(fits[key]["params"], splines.Correction.from_json(fits[key]["correction"]))
            measured = frame["seconds"].to_numpy()
            llm = frame.index.isin(llm_rows(frame).index)
            aligned = (frame["m"].to_numpy() % 16 == 0) | (frame["m"].to_numpy() < 16)
            row = [gpu, dtype, errors(shipped.predict("gemm", frame, hw, dtype), measured, llm & aligned)]
            row.append(errors(shipped.predict("gemm", frame, hw, dtype), measured, llm & ~aligned))
            if args.refit:
                held = np.asarray(held_out_mask(frame), dtype=bool)
                params = curve_fit.fit_curve("gemm", frame[~held], hw, dtype)
                curve = curve_fit.predict("gemm", frame, hw, dtype, params)
                x = np.column_stack([curve_fit.features("gemm", frame), aligned.astype(float)])
                spec = curves.CORRECTIONS["gemm"]
                residual = np.log(measured / curve)[~held]
                correction = splines.fit_correction(x[~held], residual, ((0, 1, 2, 3),), spec.max_knots, spec.damping)
                refit = curve * np.exp(correction(x))
                row += [
                    errors(refit, measured, llm & aligned),
                    errors(refit, measured, llm & ~aligned),
                    errors(refit, measured, held & llm),
                    errors(shipped.predict("gemm", frame, hw, dtype), measured, held & llm),
                ]
            findings.append(row)
    print()
    head = "GPU | dtype | shipped on m % 16 == 0 | shipped on m % 16 == 1"
    if args.refit:
        head += " | with alignment: on 0 | on 1 | every-fifth rows (unseen) | shipped there"
    print(head + "   (signed median / P90 absolute error, LLM-sized weights)")
    for row in findings:
        print(" | ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
