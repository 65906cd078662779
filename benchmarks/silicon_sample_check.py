"""Closed-loop points nobody fitted to: AIConfigurator's public silicon_sample.csv, beyond the 45 shared rows.

    .venv/bin/python benchmarks/silicon_sample_check.py --csv PATH [--variants] [--systems b200_sxm,...]
        [--out FILE.json]

PATH is aic-core/src/aiconfigurator_core/systems/silicon_sample.csv of a checkout of ai-dynamo/aiconfigurator
(Apache-2.0; not copied into this project). Every vLLM aggregated row of plain tensor parallelism (no pipeline
stages, no separate expert-parallel, MoE-TP or attention-DP split) whose model and GPU ttftsim knows becomes a
point of the closed-loop CSV format of ../shared/validation (`concurrency` from the row's silicon_concurrency,
else its batch_size); the rows of ../shared/validation/closed_loop_vllm_h100.csv are left out. Each group (GPU,
model, vLLM release) is simulated as `ttftsim accuracy` simulates that file (ttftsim/accuracy/ground_truth.py:
the harness and engine version the row's date and release imply) and its TTFT and TPOT mean errors printed.
The output keeps only ttftsim's errors per group, not the measurements. Nothing here is fitted.

With --variants each group is also simulated under the harness variants of docs/accuracy.md's closed-loop
section (closed_loop_harness.py): ideal clients (spread over one request's duration), one prompt per request,
and one prompt per request with output lengths uniform in [(1 - s) O, O] for s = 10% and 50%. They test
the assumed harness on points it was not chosen on; s is not fitted (two values shown).

The rows carry their provenance (silicon_data_source) and this script reads it for one thing only: which
measurement pipeline wrote the row, printed beside each group (the CSV format that `ttftsim accuracy`
reads has no such column, so the simulation does not use it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from closed_loop_harness import ideal_client, variant  # noqa: E402

from ttftsim.accuracy.ground_truth import Case, read_ground_truth  # noqa: E402
from ttftsim.accuracy.harness import run_all, summarize  # noqa: E402
from ttftsim.accuracy.names import resolve_hardware, resolve_model  # noqa: E402
from ttftsim.shared_data import shared_dir  # noqa: E402

COLUMNS = [
    "system", "backend", "backend_version", "model_path", "precision", "gemm_quant_mode", "mode",
    "isl", "osl", "concurrency", "tp_size", "pp_size", "silicon_ttft_ms", "silicon_tpot_ms",
]  # fmt: skip
VARIANTS: dict[str, Callable[[Case], Case]] = {  # harness variants (--variants), none fitted
    "ideal clients": ideal_client,
    "unique prompts": lambda case: variant(case, 0.0, True),
    "unique prompts, lengths spread 10%": lambda case: variant(case, 0.1, True),
    "unique prompts, lengths spread 50%": lambda case: variant(case, 0.5, True),
}
KEY = ["system", "backend_version", "model_path", "precision", "isl", "osl", "concurrency", "tp_size"]


def pipeline(source: str) -> str:
    """Which measurement pipeline wrote a row, from its silicon_data_source."""
    if "ai-dynamo/vllm-runtime" in source:
        return "Dynamo vllm-runtime"
    if "vllm/vllm-openai" in source:
        return "vllm-openai image"
    if "source_file=2026-04-06.csv" in source:
        return "2025 sweep"
    return "other"


def _keys(rows: pd.DataFrame) -> list[str]:
    """Each row's point: release, model, precision, GPU, lengths, concurrency and TP (a missing value as "")."""
    columns = [
        rows[c].map(lambda v: "" if pd.isna(v) else f"{float(v):g}" if isinstance(v, float) else str(v)) for c in KEY
    ]
    return ["|".join(parts) for parts in zip(*columns, strict=True)]


def points(csv: Path) -> pd.DataFrame:
    """The vLLM aggregated rows ttftsim can simulate, in the shared closed-loop format, minus the shared rows."""
    rows = pd.read_csv(csv)
    rows = rows[(rows["backend"] == "vllm") & (rows["mode"] == "agg") & (rows["pp_size"] == 1)].copy()
    # plain tensor parallelism only, as the closed-loop format says (MoE rows with their own expert-parallel,
    # MoE-TP or attention-DP split describe another deployment)
    plain = (
        (rows["moe_tp_size"].fillna(0).le(1) | (rows["moe_tp_size"] == rows["tp_size"]))  # dense models: 0 or 1
        & rows["moe_ep_size"].fillna(1).le(1)
        & rows["attention_dp_size"].fillna(1).le(1)
    )
    rows = rows[plain]
    found = rows["silicon_data_source"].str.extract(r"silicon_concurrency=(\d+)", expand=False).astype(float)
    rows["concurrency"] = found.fillna(rows["batch_size"])
    rows["pipeline"] = rows["silicon_data_source"].map(pipeline)
    known = [
        not (
            resolve_model(str(r["model_path"]), None if pd.isna(r["precision"]) else str(r["precision"])).problem
            or resolve_hardware(str(r["system"])).problem
        )
        for _, r in rows.iterrows()
    ]
    rows = rows[known]
    folder = shared_dir()
    shared = folder / "validation" / "closed_loop_vllm_h100.csv" if folder is not None else None
    if shared is not None and shared.exists():
        taken = set(_keys(pd.read_csv(shared)))
        rows = rows[[key not in taken for key in _keys(rows)]]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", type=Path, required=True, help="AIConfigurator's silicon_sample.csv")
    ap.add_argument("--out", type=Path, help="write the per-group errors here (JSON)")
    ap.add_argument("--variants", action="store_true", help="also simulate each group under the harness variants")
    ap.add_argument(
        "--systems",
        help="only these systems (comma-separated, e.g. b200_sxm); with --out, the other systems' groups already in "
        "that file are kept",
    )
    args = ap.parse_args()
    rows = points(args.csv)
    only = set(args.systems.split(",")) if args.systems else None
    if only is not None:
        if missing := sorted(only - set(rows["system"])):
            print(f"--systems: no points can be simulated for {', '.join(missing)}", file=sys.stderr)
            return 2
        rows = rows[rows["system"].isin(only)]
    groups = []
    started = time.perf_counter()
    for (system, model, version), group in rows.groupby(
        ["system", "model_path", rows["backend_version"].fillna("not named (as 0.11)")], sort=True
    ):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "points.csv"
            group[COLUMNS].to_csv(path, index=False)
            cases = read_ground_truth(path)
            results, skipped = run_all(cases)
            variants = {}
            for name, change in VARIANTS.items() if args.variants else ():
                varied = summarize(run_all([change(case) for case in cases])[0])["metrics"]
                variants[name] = {f"{m}_median_ape": round(v["median_ape"], 4) for m, v in varied.items()}
        metrics = summarize(results)["metrics"]
        entry = {
            "system": system,
            "model": model,
            "vllm": version,
            "pipeline": ", ".join(sorted(set(group["pipeline"]))),
            "points": len(group) - len(skipped),  # simulated
            "skipped": len(skipped),  # cannot be simulated (e.g. does not fit in memory)
            **{f"{m}_median_ape": round(v["median_ape"], 4) for m, v in metrics.items()},
            **{f"{m}_stages": v["stages"] for m, v in metrics.items()},
            **({"variants": variants} if variants else {}),
        }
        groups.append(entry)
        ttft, tpot = entry.get("ttft_mean_median_ape"), entry.get("tpot_mean_median_ape")
        print(
            f"{system:9} {re.sub('^.*/', '', model):28} vLLM {version:24} {entry['pipeline']:20} "
            f"{entry['points']:4} points  TTFT {ttft if ttft is None else f'{ttft:6.1%}'}  "
            f"TPOT {tpot if tpot is None else f'{tpot:6.1%}'}",
            flush=True,
        )
        for name, errors in variants.items():
            ttft, tpot = errors.get("ttft_mean_median_ape"), errors.get("tpot_mean_median_ape")
            print(f"    {name:36} TTFT {ttft if ttft is None else f'{ttft:6.1%}'}  "
                  f"TPOT {tpot if tpot is None else f'{tpot:6.1%}'}", flush=True)  # fmt: skip
    simulated = sum(g["points"] for g in groups)
    print(f"{simulated} points simulated ({len(rows) - simulated} skipped) in {time.perf_counter() - started:.0f} s")
    if args.out:
        if only is not None and args.out.exists():  # the other systems' groups as the file has them
            kept = [g for g in json.loads(args.out.read_text())["groups"] if g["system"] not in only]
            groups = sorted(kept + groups, key=lambda g: (g["system"], g["model"], g["vllm"]))
        args.out.write_text(json.dumps({"source": "silicon_sample.csv (ai-dynamo/aiconfigurator)", "groups": groups},
                                       indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
