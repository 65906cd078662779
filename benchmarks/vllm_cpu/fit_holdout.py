"""`ttftsim fit` on the real vLLM 0.32 CPU server's runs, judged on workloads it did not see.

    .venv/bin/python benchmarks/vllm_cpu/fit_holdout.py [--tag run3] [--out benchmarks/vllm_cpu/fit_holdout.json]
        [--deployment tests/data/reports/cpu-server.yaml]

Reads the committed runs (serve_runs/<workload>-<client>/<tag>.json, written by serve_bench.py: what each
real client sent and measured, per request); runs nothing against a server. Each run becomes a measured
run as the report readers make them (ttftsim/accuracy/reports/measured.py: the requests' own TTFT and
TPOT percentiles, an open loop replayed at its logged send times, a closed loop with its clients and
lengths, aiperf's warm-up compared by means), on the deployment tests/data/reports/cpu-server.yaml (the
server's engine arguments and its microbenchmarked step and API-server costs, fitted to no TTFT). The
shared-prefix run is a Poisson workload at its rate with its 384-token prefix (a replayed trace has no
prefix). The workloads are split in two halves (alternately, in name order); the factors are fitted on one
half and predict the other, both ways round (the held-out half is the cross-validation: no folds inside).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ttftsim.accuracy.fit import median_errors
from ttftsim.accuracy.fit_run import fit_cases, parse_factors
from ttftsim.accuracy.ground_truth import Case
from ttftsim.accuracy.harness import StageResult, run_case
from ttftsim.accuracy.reports.cases import load_deployment, to_case
from ttftsim.accuracy.reports.measured import Load, MeasuredRun, Sent, mean_or_zero, truth_from_requests
from ttftsim.config.deployment_calibration import FACTOR_NAMES, FactorName, Factors

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEPLOYMENT = ROOT / "tests" / "data" / "reports" / "cpu-server.yaml"
TOOLS = {"vllmbench": "vllm-bench", "guidellm": "guidellm", "aiperf": "aiperf"}
SHARED_PREFIX_TOKENS = 384
METRICS = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "ttft_mean", "tpot_mean")


def load_runs(tag: str) -> dict[str, dict[str, Any]]:
    runs = {}
    for folder in sorted(p for p in (HERE / "serve_runs").iterdir() if p.is_dir()):
        path = folder / f"{tag}.json"
        if path.exists():
            runs[folder.name] = json.loads(path.read_text())
    return runs


def measured_run(name: str, run: dict[str, Any]) -> MeasuredRun:
    """The run as a report reader would give it: per-request lengths, sends (open loop) and measurements."""
    params = run["params"]
    kept = [r for r in run["requests"] if r.get("phase", "profiling") == "profiling"]
    ok = [r for r in kept if r.get("error") in (None, "") and r.get("ttft_s") is not None]
    warmup = int(params.get("warmup_requests", 0))
    if "closed_loop_concurrency" in params:
        load, sends = Load(concurrency=int(params["closed_loop_concurrency"]), warmup_requests=warmup), ()
    else:
        first = min(r["send_s"] for r in kept)
        sends = tuple(r["send_s"] - first for r in kept)
        span = max(sends) - min(sends)
        load = Load(rate_per_s=round((len(sends) - 1) / span, 3))
    prompts = tuple(int(r["prompt_tokens"]) for r in kept)
    outputs = tuple(int(r["output_tokens"]) for r in kept)
    truth = truth_from_requests(
        load.label(),
        [r["ttft_s"] for r in ok],
        [r["latency_s"] for r in ok],
        [int(r["output_tokens"]) for r in ok],
        len(kept) - len(ok),
    )
    entries = len(run["requests"]) if run["client"] == "aiperf" else None  # one prompt per request, warm-up too
    return MeasuredRun(
        name,
        TOOLS[run["client"]],  # type: ignore[arg-type]
        "",
        load,
        Sent(prompts, outputs, sends),
        mean_or_zero(prompts),
        mean_or_zero(outputs),
        truth,
        dataset_entries=entries,
    )


def shared_prefix(case: Case, run: MeasuredRun, folder: Path) -> Case:
    """Poisson at the run's rate, the 384-token prefix shared, the suffixes as logged."""
    suffixes = folder / "shared-prefix-suffixes.json"
    suffixes.write_text(json.dumps([n - SHARED_PREFIX_TOKENS for n in run.sent.prompt_tokens]))
    assert run.load is not None
    workload = {
        "type": "synthetic",
        "arrivals": {"type": "poisson", "rate": run.load.rate_per_s},
        "prompt_tokens": {"type": "empirical", "path": str(suffixes)},
        "output_tokens": {"type": "fixed", "value": run.sent.output_tokens[0]},
        "shared_prefix_tokens": SHARED_PREFIX_TOKENS,
        "num_requests": len(run.sent.prompt_tokens),
    }
    scenario = case.scenario.model_validate(case.scenario.model_dump() | {"workload": workload})
    return replace(case, scenario=scenario)


def cases_of(runs: dict[str, dict[str, Any]], folder: Path) -> list[Case]:
    deployment = load_deployment(DEPLOYMENT)
    cases = []
    for index, (name, run) in enumerate(runs.items()):
        measured = measured_run(name, run)
        case = to_case(measured, deployment, folder, index)
        cases.append(shared_prefix(case, measured, folder) if name.startswith("shared-prefix") else case)
    return cases


def predict(cases: list[Case], factors: Factors, folder: Path) -> list[StageResult]:
    path = folder / "held-out.json"
    document = {"format": "ttftsim-deployment-calibration", "version": 1, "hardware": "CPU-host"}
    path.write_text(json.dumps(document | {"factors": factors.model_dump()}))
    results = []
    for case in cases:
        engine = case.scenario.engine.model_copy(update={"calibration": str(path)})
        results += run_case(
            replace(case, scenario=case.scenario.model_copy(update={"engine": engine})), DEPLOYMENT.parent
        )
    return results


def rows(results: list[StageResult]) -> list[dict[str, Any]]:
    return [
        {
            "run": r.case,
            "measured": r.measured,
            "predicted": r.predicted,
            "errors": r.errors(),
            "client_bound": r.measured_client_bound,
        }
        for r in results
    ]


def one_way(
    train: list[Case],
    test: list[Case],
    folder: Path,
    names: tuple[FactorName, ...],
    select: bool = False,
    guard: bool = False,
) -> dict[str, Any]:
    """Fit on `train`, predict `test`. select: best-subset selection by cross-validation within `train`
    (fit_select.select, its own folds; `test` is never seen); guard: every factor with cross-validation within
    `train`, applied only if it predicts the runs its folds held out clearly better than none (as `ttftsim fit`
    does by default: fit_select.guarded); otherwise every factor, without folds, applied as fitted."""
    calibration, result, _ = fit_cases(
        train,
        DEPLOYMENT.parent,
        folder,
        names,
        [],
        str(DEPLOYMENT),
        print_progress,
        cross_validate=select or guard,
        select_factors=select,
        guard=guard,
    )
    held_out = predict(test, result.factors, folder)
    unfitted = predict(test, Factors(), folder)
    return {
        "train": [case.name for case in train],
        "test": [case.name for case in test],
        "factors": result.factors.model_dump(),
        "fitted": list(result.names),
        "selection": [{"factors": list(subset), "cross_validated_score": score} for subset, score in result.selection],
        "verdict": None if result.verdict is None else asdict(result.verdict),
        "rejected": None if result.rejected is None else result.rejected.factors.model_dump(),
        "intervals": {name: list(result.interval(name)) for name in result.names},
        "train_errors": calibration.errors.model_dump() if calibration.errors else None,
        "held_out": median_errors(held_out, METRICS),
        "held_out_unfitted": median_errors(unfitted, METRICS),
        "held_out_rows": rows(held_out),
        "unfitted_rows": rows(unfitted),
        "_results": (held_out, unfitted, result),
    }


def print_progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def pooled(ways: list[dict[str, Any]], key: str) -> dict[str, float]:
    """Median APE per metric over every held-out run of both directions that is not client-bound (as the
    harness's medians: StageResult.is_scored)."""
    errors: dict[str, list[float]] = {}
    for way in ways:
        for row in (row for row in way[key] if not row.get("client_bound")):
            for metric, value in row["errors"].items():
                if metric in METRICS:
                    errors.setdefault(metric, []).append(value)
    return {metric: statistics.median(values) for metric, values in errors.items()}


def main() -> int:
    global DEPLOYMENT
    parser = argparse.ArgumentParser()
    parser.add_argument("--tag", default="run3")
    parser.add_argument("--out", type=Path, default=HERE / "fit_holdout.json")
    parser.add_argument("--factors", default=",".join(FACTOR_NAMES))
    parser.add_argument("--deployment", type=Path, default=DEPLOYMENT, help="the server's scenario file (costs)")
    parser.add_argument("--skip", default="", help="workloads left out (comma-separated folder names)")
    parser.add_argument(
        "--select",
        action="store_true",
        help="best-subset selection of the factors by cross-validation within each half (fit_select.select)",
    )
    parser.add_argument(
        "--guard",
        action="store_true",
        help="as `ttftsim fit` by default: every factor with cross-validation within each half, not applied unless "
        "it predicts the runs its folds held out clearly better than none (fit_select.guarded)",
    )
    args = parser.parse_args()
    if args.select and args.guard:
        parser.error("--guard has no effect with --select (selection keeps what its folds show to help): give one")
    DEPLOYMENT = args.deployment.resolve()
    skipped = set(filter(None, args.skip.split(",")))
    runs = {name: run for name, run in load_runs(args.tag).items() if name not in skipped}
    with tempfile.TemporaryDirectory(prefix="ttftsim-fit-holdout-") as name:
        folder = Path(name)
        cases = cases_of(runs, folder)
        halves = (cases[0::2], cases[1::2])
        ways = []
        for train, test in (halves, halves[::-1]):
            print(f"fit on {', '.join(c.name for c in train)}", file=sys.stderr, flush=True)
            ways.append(one_way(train, test, folder, parse_factors(args.factors), args.select, args.guard))
    for way in ways:
        way.pop("_results")
    summary = {
        "tag": args.tag,
        "factors": args.factors.split(","),
        "skipped": sorted(skipped),
        "select": args.select,
        "guard": args.guard,
        "deployment": str(DEPLOYMENT.relative_to(ROOT)),
        "held_out": pooled(ways, "held_out_rows"),
        "held_out_unfitted": pooled(ways, "unfitted_rows"),
        "ways": ways,
    }
    args.out.write_text(json.dumps(summary, indent=1, default=float) + "\n")
    for way in ways:
        print(f"fit on {len(way['train'])} workloads: {way['factors']}")
    bound = sum(all(stage.is_client_bound for stage in case.stages) for case in cases)
    where = f"{len(cases)} held-out runs"
    if bound:
        where = f"{len(cases) - bound} held-out runs not client-bound (of {len(cases)}; the fits left them out too)"
    print(f"{'metric':<12}{'unfitted':>10}{'fitted':>10}   (median abs error over {where})")
    for metric in METRICS:
        if metric in summary["held_out"]:
            print(f"{metric:<12}{summary['held_out_unfitted'][metric]:>10.1%}{summary['held_out'][metric]:>10.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
