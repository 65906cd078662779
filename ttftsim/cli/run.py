"""The commands that run the simulator: simulate, plan, validate, compare. Each parses, makes one library
call and renders; exit 1 when the run's SLO (or the plan) is not met."""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from ttftsim.cli.app import MaxRequests, app, console, phase_progress, progress_bar, request_limit
from ttftsim.errors import CalibrationRangeWarning, InputError
from ttftsim.render.compare import render_compare
from ttftsim.render.plan import render_plan
from ttftsim.render.summary import render_summary
from ttftsim.render.validation import render_validation


@contextlib.contextmanager
def summarised_warnings() -> Iterator[None]:
    """A run whose summary lists the calibrated ranges it left (its warnings, printed or in the JSON): those are not
    also said on stderr as they happen."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CalibrationRangeWarning)
        yield


@app.command()
def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML: model, hardware, engine, workload")],
    seed: Annotated[
        int | None, typer.Option(min=0, max=2**63 - 1, help="Random seed (default: the scenario's)")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write requests, iterations, time series, summary here; the wall time goes to run.json"),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON on stdout (the same bytes for the same seed)")
    ] = False,
    max_requests: MaxRequests = None,
) -> None:
    """Simulate one replica under a workload. Exit 1 when a target of the scenario's slo is not met.
    --json and summary.json hold only what the scenario and seed determine (identical bytes run after run);
    the wall time is in the human output and in run.json; anything read but not modelled is in warnings."""
    from ttftsim.metrics.export import write_results
    from ttftsim.result_folder import check_target
    from ttftsim.run_info import write_run_info
    from ttftsim.simulate import load_scenario
    from ttftsim.simulate import simulate as run

    request_limit(max_requests)
    spec = load_scenario(scenario)
    if out is not None:
        check_target(out, "simulation")  # a bad --out is said before the run, not after it
    with progress_bar(enabled=not as_json) as report, summarised_warnings():
        result = run(spec, scenario.parent, seed, progress=report, source=str(scenario))
    summary = result.summary()
    if out is not None:
        cluster = result.cluster  # its pods and HPA syncs (docs/cluster.md outputs)
        tables = {} if cluster is None else {"pods.csv": cluster.pods, "hpa.csv": cluster.hpa}
        write_results(
            out, result.requests, result.steps, result.time_series(), summary.to_json(), result.prometheus(), tables
        )
        write_run_info(out, result.run_info())
    if as_json:
        sys.stdout.write(json.dumps(summary.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        render_summary(console, summary, result.wall_s)
    if summary.slo is not None and not summary.slo.met:
        raise typer.Exit(1)


@app.command()
def plan(
    plan_file: Annotated[Path, typer.Argument(help="Plan YAML: model, traffic, SLOs, the space to search")],
    workers: Annotated[
        int, typer.Option(min=1, max=1024, help="Candidates simulated in parallel (locally: at most one per CPU)")
    ] = 2,
    backend: Annotated[str, typer.Option(help="local (processes) or ray")] = "local",
    out: Annotated[
        Path | None,
        typer.Option(
            help="Where results, manifests and the checkpoint go (default: plan-<the plan file's name without its "
            "extension> in the current folder); tasks computed or reused: run.json"
        ),
    ] = None,
    resume: Annotated[bool, typer.Option(help="Reuse the checkpoint of an interrupted run in --out")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON on stdout (the same bytes for the same seed)")
    ] = False,
    max_requests: MaxRequests = None,
) -> None:
    """Find the cheapest deployments that meet the SLOs. Exit 1 when none does (what came closest is shown).
    --json and plan.json are identical for the same plan and seed, fresh or resumed; the tasks computed and
    taken from the checkpoint are in the human output and in run.json."""
    from ttftsim.plan.run import run_plan
    from ttftsim.result_folder import check_target

    request_limit(max_requests)
    if backend not in ("local", "ray"):
        raise InputError("--backend", "", f"unknown backend {backend!r} (local or ray)")
    if backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise InputError("--backend", "", "ray is not installed (pip install 'ttftsim[dist]')") from None
    folder = out or Path(f"plan-{plan_file.stem}")
    check_target(folder, "plan")
    with phase_progress(enabled=not as_json) as report:
        result = run_plan(plan_file, folder, workers, backend, resume, report)
    if as_json:
        sys.stdout.write(json.dumps(result.as_json(), indent=1) + "\n")
    else:
        render_plan(console, result, folder)
    if result.winner is None:
        raise typer.Exit(1)


@app.command()
def validate(
    deploy: Annotated[Path, typer.Argument(help="Deployment file: traffic, SLO, and manifests or engine arguments")],
    manifest: Annotated[list[Path] | None, typer.Option(help="Kubernetes manifest (repeatable)")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print findings, warnings and prediction as JSON (deterministic)")
    ] = False,
    max_requests: MaxRequests = None,
) -> None:
    """Check a deployment (memory, KV, TP, GPU requests and affinity, probes, HPA) and predict its TTFT.
    Exit 0 pass, 1 a finding is an error, 2 invalid input. What the manifests or the model set that is not
    modelled (a sliding window, vLLM flags known but not modelled) is a warning; it never fails a run."""
    from ttftsim.validate.run import validate as check

    request_limit(max_requests)
    report = check(deploy, list(manifest or []))
    if as_json:
        sys.stdout.write(json.dumps(report.as_json(), indent=1, default=str) + "\n")
    else:
        render_validation(console, report)
    if not report.passed:
        raise typer.Exit(1)


@app.command()
def compare(
    first: Annotated[Path, typer.Argument(help="Scenario A (its traffic is used for both)")],
    second: Annotated[Path, typer.Argument(help="Scenario B")],
    seed: Annotated[int | None, typer.Option(min=0, max=2**63 - 1, help="Random seed (default: A's)")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as JSON (the same bytes for the same seed)")
    ] = False,
    max_requests: MaxRequests = None,
) -> None:
    """The same traffic through two scenarios: TTFT percentiles, TPOT, throughput, cost ($/M output tokens at the
    traffic's demand, as plan prices it), TTFT breakdown. Exit 1 when A or B misses its SLO."""
    from ttftsim.compare import SLO_MET_ROW
    from ttftsim.compare import compare as run

    request_limit(max_requests)
    with summarised_warnings():
        result = run(first, second, seed)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    else:
        render_compare(console, result)
    if any(row["metric"] == SLO_MET_ROW and 0.0 in (row["a"], row["b"]) for row in result["rows"]):
        raise typer.Exit(1)
