"""`ttftsim fit` on ../shared/validation's H100 runs treated as a user's: fitted on one model's runs, predicting
the other model's (on the same GPU type, vLLM version and engine arguments).

    .venv/bin/python benchmarks/fit_h100.py [--out benchmarks/fit_h100.json] [--factors a,b] [--guard]

h100_vllm_runs.json holds four runs per model (Llama-2-7b on one H100, CodeLlama-34b on two): codegen,
roleplay, general and reasoning, at 4-20 req/s constant-rate stages. The reasoning runs were overloaded
(timeouts) and are left out (fit_run.fitted_cases). The others are fitted on their TTFT P50/P90/P99 and
TPOT P50 per stage, each stage cut to its first --max-stage-s seconds to keep the fit fast (the held-out
model's predictions simulate whole stages); no folds inside (the other model is the held-out set), unless
--guard: then leave-one-out within the model's runs decides whether the fit is applied at all, as `ttftsim fit`
does by default (fit_select.guarded).
Predictions use the kernel curves fitted to H100 tables (kernel_costs auto).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ttftsim.accuracy.fit import median_errors
from ttftsim.accuracy.fit_run import fit_cases, parse_factors
from ttftsim.accuracy.ground_truth import Case, read_ground_truth
from ttftsim.accuracy.harness import StageResult, run_case
from ttftsim.config.deployment_calibration import FACTOR_NAMES, Factors
from ttftsim.shared_data import shared_dir

HERE = Path(__file__).resolve().parent
METRICS = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50")
MODELS = {"llama-2-7b": "Llama-2-7b (TP1)", "codellama-34b": "CodeLlama-34b (TP2)"}


def predict(cases: list[Case], factors: Factors, folder: Path, hardware: str) -> list[StageResult]:
    path = folder / "held-out.json"
    document = {"format": "ttftsim-deployment-calibration", "version": 1, "hardware": hardware}
    path.write_text(json.dumps(document | {"factors": factors.model_dump()}))
    results = []
    for case in cases:
        engine = case.scenario.engine.model_copy(update={"calibration": str(path)})
        results += run_case(replace(case, scenario=case.scenario.model_copy(update={"engine": engine})))
    return results


def shortened(case: Case, max_stage_s: float) -> Case:
    """The run with each constant-rate stage cut to its first max_stage_s seconds (for the fit only: the
    held-out predictions simulate whole stages). The 100 prompts are cached within the first 20 s of a
    stage at 5 req/s or more, so a cut stage still holds mostly steady-state requests."""
    workload = case.scenario.workload.model_dump()
    arrivals = workload["arrivals"]
    arrivals["stages"] = [s | {"duration_s": min(s["duration_s"], max_stage_s)} for s in arrivals["stages"]]
    stages, start = [], 0.0
    for stage, spec in zip(case.stages, arrivals["stages"], strict=True):
        stages.append(replace(stage, start_s=start, end_s=start + spec["duration_s"]))
        start += spec["duration_s"]
    scenario = case.scenario.model_validate(case.scenario.model_dump() | {"workload": workload})
    return replace(case, scenario=scenario, stages=stages)


def rows(results: list[StageResult]) -> list[dict[str, Any]]:
    return [
        {"run": r.case, "stage": r.stage, "measured": r.measured, "predicted": r.predicted, "errors": r.errors()}
        for r in results
        if not r.measured_overloaded
    ]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=HERE / "fit_h100.json")
    parser.add_argument("--factors", default=",".join(FACTOR_NAMES))
    parser.add_argument("--max-stage-s", type=float, default=300.0, help="fit on each stage's first seconds")
    parser.add_argument(
        "--guard",
        action="store_true",
        help="as `ttftsim fit` by default: leave-one-out within the model's runs, the fit applied only if it "
        "predicts the runs its folds held out clearly better than none (fit_select.guarded)",
    )
    args = parser.parse_args()
    names = parse_factors(args.factors)
    cases = read_ground_truth(shared_dir() / "validation" / "h100_vllm_runs.json")
    by_model = {key: [c for c in cases if key in c.name and "reasoning" not in c.name] for key in MODELS}
    ways = []
    with tempfile.TemporaryDirectory(prefix="ttftsim-fit-h100-") as name:
        folder = Path(name)
        for train_key, test_key in (("llama-2-7b", "codellama-34b"), ("codellama-34b", "llama-2-7b")):
            train, test = by_model[train_key], by_model[test_key]
            print(f"fit on {MODELS[train_key]}: {len(train)} runs", file=sys.stderr, flush=True)
            short = [shortened(case, args.max_stage_s) for case in train]
            calibration, result, notes = fit_cases(
                short,
                Path(),
                folder,
                names,
                ["h100_vllm_runs.json"],
                "(the runs' own)",
                print_progress,
                cross_validate=args.guard,
                guard=args.guard,
            )
            held_out = predict(test, result.factors, folder, calibration.hardware)
            unfitted = predict(test, Factors(), folder, calibration.hardware)
            ways.append(
                {
                    "train": MODELS[train_key],
                    "test": MODELS[test_key],
                    "factors": {n: getattr(result.factors, n) for n in names},
                    "rejected": None if result.rejected is None else result.rejected.factors.model_dump(),
                    "verdict": None if result.verdict is None else asdict(result.verdict),
                    "intervals": {n: list(result.interval(n)) for n in result.names},
                    "train_errors": calibration.errors.model_dump() if calibration.errors else None,
                    "held_out": median_errors(held_out, METRICS),
                    "held_out_unfitted": median_errors(unfitted, METRICS),
                    "held_out_rows": rows(held_out),
                    "unfitted_rows": rows(unfitted),
                    "notes": notes,
                }
            )
    summary = {"factors": list(names), "guard": args.guard, "ways": ways}
    args.out.write_text(json.dumps(summary, indent=1, default=float) + "\n")
    for way in ways:
        print(f"fit on {way['train']} -> {way['test']}: {way['factors']}")
        print(f"  {'metric':<10}{'unfitted':>10}{'fitted':>10}  (median abs error, held-out stages)")
        for metric in METRICS:
            if metric in way["held_out"]:
                print(f"  {metric:<10}{way['held_out_unfitted'][metric]:>10.1%}{way['held_out'][metric]:>10.1%}")
    return 0


def print_progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
