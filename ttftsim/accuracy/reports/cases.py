"""Measured runs become accuracy cases: the deployment file (a scenario file: model, hardware, engine, costs,
client) with each run's workload in place of its own, and the run's measurements as the one stage.

Workload from the load: an open loop whose send times were logged is a trace replayed at those times with
each request's lengths; otherwise the arrival process at the rate (or the closed loop's clients), for as many
requests as were measured (plus the warm-up), with lengths sampled from the logged ones (an empirical file)
or fixed at the report's means. The files are written to `folder` (a temporary folder the command owns).
The client is the tool that measured (its warm-up and, for a synthetic aiperf dataset, its prompt count);
the deployment's other client settings stay. A run without a load (a server's metrics) keeps the deployment
file's workload and client. A closed loop with a warm-up is compared by its means (the harness leaves the
warm-up out by request); every other run by its percentiles too, over all its requests."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ttftsim.accuracy.ground_truth import Case
from ttftsim.accuracy.names import resolve_model
from ttftsim.accuracy.reports.measured import Load, MeasuredRun
from ttftsim.config.loading import validation_error
from ttftsim.config.scenario import Scenario
from ttftsim.errors import InputError
from ttftsim.inputs.structured import load_structured

CLOSED_LOOP_MEANS = ("ttft_mean", "tpot_mean")


@dataclass(frozen=True)
class Deployment:
    """A scenario file's mapping (the workload optional), and the folder its relative paths start from."""

    source: str
    spec: dict[str, Any]
    base: Path


def load_deployment(path: Path) -> Deployment:
    data = load_structured(path, "deployment")
    if not isinstance(data, dict):
        raise InputError(str(path), "", "expected a scenario mapping (model, hardware, engine, ...)")
    return Deployment(str(path), data, path.parent)


def to_case(run: MeasuredRun, deployment: Deployment, folder: Path, index: int) -> Case:
    spec = dict(deployment.spec)
    spec["name"] = run.name
    problem = run.problem
    if "model" not in spec:
        resolved = resolve_model(run.model or "(none)")
        spec["model"], problem = resolved.model, problem or resolved.problem
    if run.load is not None:
        spec["workload"] = _workload(run, run.load, folder, index)
        client = dict(spec.get("client") or {}) | {"tool": run.tool, "warmup_requests": run.load.warmup_requests}
        if run.dataset_entries is not None:
            client["dataset_entries"] = run.dataset_entries
        spec["client"] = client
    elif "workload" not in spec:
        raise InputError(
            deployment.source, "workload", f"{run.name}: a server's metrics do not say how requests were sent: "
            "give the traffic as the deployment file's workload",
        )  # fmt: skip
    try:
        scenario = Scenario.model_validate(spec)
    except ValidationError as exc:
        error = validation_error(deployment.source, exc, Scenario)
        raise InputError(deployment.source, f"{error.field} (with {run.name})", error.message) from None
    stage, closed = (
        run.truth,
        run.load is not None and run.load.concurrency is not None and run.load.warmup_requests > 0,
    )
    if closed:
        stage = replace(stage, measured={k: v for k, v in stage.measured.items() if k in CLOSED_LOOP_MEANS})
    warmup = run.load.warmup_requests if run.load is not None else 0
    stages = list(run.stages) or [stage]
    notes = run.notes
    if not run.server_side and not any(stage.ttft_values_s for stage in stages):
        notes = (*notes, UNSEEN_LATE_READS)
    return Case(run.name, scenario, stages, closed, warmup, problem, notes, server_side=run.server_side)


# A report of statistics only: the late first tokens that make a stage client-bound (ground_truth.py
# StageTruth.is_client_bound, docs/engine-semantics.md 4) are counted from per-request values.
UNSEEN_LATE_READS = (
    "no per-request values: whether the client read its streams late (a client-bound stage) cannot be told; "
    "scored as measured"
)


def _workload(run: MeasuredRun, load: Load, folder: Path, index: int) -> dict[str, Any]:
    if run.shared_prefix is not None and run.arrivals is not None:
        return {"type": "shared_prefix", "arrivals": run.arrivals, **run.shared_prefix}
    if run.arrivals is not None:  # stages back to back: their arrivals, the logged lengths
        prompts = _lengths(run.sent.prompt_tokens, run.mean_prompt_tokens, folder / f"run{index}-prompts.json")
        outputs = _lengths(run.sent.output_tokens, run.mean_output_tokens, folder / f"run{index}-outputs.json")
        return {"type": "synthetic", "arrivals": run.arrivals, "prompt_tokens": prompts, "output_tokens": outputs}
    if load.rate_per_s is not None and run.sent.send_s:
        return {"type": "trace", "format": "csv", "path": str(_trace(run, folder / f"run{index}-trace.csv"))}
    if load.concurrency is not None:
        arrivals: dict[str, Any] = {"type": "closed_loop", "clients": load.concurrency}
    elif load.process == "gamma":
        arrivals = {"type": "gamma", "rate": load.rate_per_s, "cv": load.cv}
    else:
        arrivals = {"type": load.process, "rate": load.rate_per_s}
    measured = run.truth.num_succeeded + run.truth.num_failed
    return {
        "type": "synthetic",
        "arrivals": arrivals,
        "prompt_tokens": _lengths(run.sent.prompt_tokens, run.mean_prompt_tokens, folder / f"run{index}-prompts.json"),
        "output_tokens": _lengths(run.sent.output_tokens, run.mean_output_tokens, folder / f"run{index}-outputs.json"),
        "num_requests": max(1, measured + load.warmup_requests),
    }


def _trace(run: MeasuredRun, path: Path) -> Path:
    rows = sorted(zip(run.sent.send_s, run.sent.prompt_tokens, run.sent.output_tokens, strict=True))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("arrival_s", "input_tokens", "output_tokens"))
        writer.writerows((f"{t:.6f}", max(1, p), o) for t, p, o in rows)
    return path


def _lengths(logged: tuple[int, ...], mean: float, path: Path) -> dict[str, Any]:
    if logged:
        path.write_text(json.dumps([max(1, n) for n in logged]), encoding="utf-8")
        return {"type": "empirical", "path": str(path)}
    return {"type": "fixed", "value": max(1, round(mean)) if math.isfinite(mean) else 1}
