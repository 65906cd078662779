"""`ttftsim fit`: the runs of several benchmark reports on one deployment, the identifiability checks, the
fit with cross-validation, and the calibration file (config/deployment_calibration.py) it writes."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ttftsim.accuracy.fit import Evaluator, FitResult, Problem, fit, median_errors
from ttftsim.accuracy.fit_checks import MIN_RUNS, SOURCE, check_effects, check_runs
from ttftsim.accuracy.fit_select import guarded, judge, select
from ttftsim.accuracy.ground_truth import Case, StageTruth, client_bound_note
from ttftsim.accuracy.harness import OVERLOAD_TTFT_S
from ttftsim.accuracy.reports import measured_cases
from ttftsim.accuracy.reports.detect import is_metrics_snapshot
from ttftsim.config.deployment_calibration import (
    FACTOR_NAMES,
    DeploymentCalibration,
    FactorFit,
    FactorName,
    MetricErrors,
    NotApplied,
    Provenance,
)
from ttftsim.errors import InputError
from ttftsim.perf.linear import LinearStepModel
from ttftsim.replica import build_replica
from ttftsim.step_costs import SharedCoreCost


def parse_factors(text: str) -> tuple[FactorName, ...]:
    """A comma-separated list of factor names (--factors), each known and named once."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in FACTOR_NAMES]
    if unknown or not names or len(set(names)) != len(names):
        what = f"unknown factor {unknown[0]!r}" if unknown else "expects distinct factor names"
        raise InputError("--factors", "", f"{what} (known: {', '.join(FACTOR_NAMES)})")
    return tuple(name for name in FACTOR_NAMES if name in names)


def min_host_overhead_s(case: Case, base: Path) -> tuple[str, float]:
    """The hardware's name and the smallest host time per step of the deployment (the overhead's bound),
    without a calibration the deployment names (each trial of the fit replaces it)."""
    engine = case.scenario.engine.model_copy(update={"calibration": None})
    replica = build_replica(case.scenario.model_copy(update={"engine": engine}), base, case.name)
    deployment = replica.perf.deployment
    cost = replica.cost.inner if isinstance(replica.cost, SharedCoreCost) else replica.cost
    if isinstance(cost, LinearStepModel):
        return deployment.hardware.name, cost.fixed_s
    host = [deployment.iteration_overhead_s, deployment.decode_graph_iteration_s]
    return deployment.hardware.name, min(value for value in host if value is not None)


def fit_reports(
    reports: Sequence[Path],
    deployment: Path | None,
    names: tuple[FactorName, ...],
    progress: Callable[[str], None] = lambda _: None,
    select_factors: bool = False,
    before: Sequence[Path] = (),
    guard: bool = True,
    workers: int = 1,
) -> tuple[DeploymentCalibration, FitResult, list[str]]:
    """Fit the factors to every run of the reports (a tool's report on the deployment file; a measured-run
    file of ../shared/validation names its own); the calibration, the fit, and notes (the runs left out, what
    each run's reader noted, a calibration the deployment names that the fit does not start from).
    before: a snapshot per /metrics report, in their order (the run is the difference).
    select_factors: fit only the factors that selection by cross-validation keeps (fit_select.select).
    guard: a fit that does not predict its held-out runs clearly better than none is not applied (fit_cases).
    workers: processes that simulate the runs of one evaluation (fit_cases)."""
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="ttftsim-fit-") as folder:
        read: list[tuple[Case, Path]] = []
        sources: dict[tuple[object, ...], tuple[Path, str]] = {}
        base = Path() if deployment is None else deployment.parent
        for report, earlier in zip(reports, _pair_snapshots(reports, before), strict=True):
            report_cases, base = stack.enter_context(measured_cases(report, deployment, earlier))
            for case in report_cases:
                _refuse_repeated(case, report, sources)
            read += [(case, report) for case in report_cases]
        cases = unique_names(read)
        where = "(the reports' own)" if deployment is None else str(deployment)
        paths = [str(path) for path in reports]
        calibration, result, notes = fit_cases(
            cases,
            base,
            Path(folder),
            names,
            paths,
            where,
            progress,
            select_factors=select_factors,
            guard=guard,
            workers=workers,
        )
        notes += _reader_notes(cases)
        named = sorted(
            {str(base / case.scenario.engine.calibration) for case in cases if case.scenario.engine.calibration}
        )
        if named:
            notes.append(
                f"{where} names engine.calibration {', '.join(named)}: not applied while fitting (the factors are "
                "fitted to the uncalibrated model); use the file written instead of it, not on top of it"
            )
        return calibration, result, notes


def unique_names(read: list[tuple[Case, Path]]) -> list[Case]:
    """The runs, each named as its report names it, or with its report's path where another report names a run
    the same (every GuideLLM report is benchmarks.json, its runs 'benchmarks #0', ...): errors, folds and the
    verdict are per run, by name, and two runs under one name would count as one."""
    counts = Counter(case.name for case, _ in read)
    return [case if counts[case.name] == 1 else replace(case, name=f"{case.name} ({report})") for case, report in read]


def _reader_notes(cases: list[Case]) -> list[str]:
    """What the readers noted on the runs fitted, each note once with the runs it is about."""
    runs: dict[str, list[str]] = {}
    for case in cases:
        for note in case.notes if case.skip_reason is None else ():
            runs.setdefault(note, []).append(case.name)
    return [f"{', '.join(names) if len(names) <= 3 else f'{len(names)} runs'}: {note}" for note, names in runs.items()]


def _pair_snapshots(reports: Sequence[Path], before: Sequence[Path]) -> list[Path | None]:
    """Each report's --before: the n-th snapshot goes with the n-th /metrics report; none without --before."""
    if not before:
        return [None] * len(reports)
    snapshots = [index for index, report in enumerate(reports) if is_metrics_snapshot(report)]
    if len(snapshots) != len(before):
        raise InputError(
            "--before", "", f"{len(before)} snapshot(s) for {len(snapshots)} /metrics report(s): give one --before "
            "per /metrics report, in the reports' order",
        )  # fmt: skip
    paired: list[Path | None] = [None] * len(reports)
    for index, earlier in zip(snapshots, before, strict=True):
        paired[index] = earlier
    return paired


def _refuse_repeated(case: Case, report: Path, sources: dict[tuple[object, ...], tuple[Path, str]]) -> None:
    """The same measurement twice (a report given twice, or a copy) is refused: cross-validation would test a
    run on a fold that holds its copy, and the fit would weigh it double."""
    arrivals = getattr(case.scenario.workload, "arrivals", None)
    load = (case.closed_loop, case.warmup_requests, getattr(arrivals, "clients", None), getattr(arrivals, "rate", None))
    key = (load, *(
        (stage.start_s, stage.end_s, tuple(sorted(stage.measured.items())), stage.num_succeeded, stage.num_failed,
         stage.ttft_values_s)
        for stage in case.stages
    ))  # fmt: skip
    if key in sources:
        first, name = sources[key]
        raise InputError(
            str(report), "", f"run {case.name} is the same measurement as run {name} of {first}: each run once "
            "(a run and its copy would cross-validate on themselves)",
        )  # fmt: skip
    sources[key] = (report, case.name)


def _overloaded(stage: StageTruth) -> bool:
    return stage.num_failed > 0 or stage.measured.get("ttft_p50", 0.0) > OVERLOAD_TTFT_S


def fitted_cases(cases: list[Case], base: Path) -> tuple[list[Case], list[str], str, float]:
    """The runs to fit (not skipped; not measured as overloaded: their requests timed out, and simulating
    minutes of backlog says nothing about the factors; not client-bound: their TTFTs are not the engine's; a
    run with some client-bound stages is kept, those stages not fitted to, with a note), notes on the others,
    the hardware they all share and the smallest host time per step."""
    notes, kept = [], []
    for case in cases:
        if case.skip_reason is not None:
            notes.append(f"{case.name}: left out ({case.skip_reason})")
        elif all(_overloaded(stage) for stage in case.stages):
            notes.append(f"{case.name}: left out (measured overloaded: requests failed or median TTFT over 10 s)")
        elif all(stage.is_client_bound for stage in case.stages):
            notes.append(f"{case.name}: left out ({client_bound_note(case.stages, 'not fitted to')})")
        elif all(stage.is_client_bound or _overloaded(stage) for stage in case.stages):
            notes.append(f"{case.name}: left out (every stage measured overloaded or client-bound)")
        else:
            if bound := [stage for stage in case.stages if stage.is_client_bound]:
                labels = ", ".join(stage.label for stage in bound)
                notes.append(f"{case.name} ({labels}): {client_bound_note(bound, 'those stages not fitted to')}")
            kept.append(case)
    if notes and len(kept) < MIN_RUNS:  # say why the others went, or the refusal reads as too few reports
        raise InputError(
            SOURCE, "runs", f"{len(kept)} run(s) to fit: cross-validation needs at least {MIN_RUNS} "
            f"({'; '.join(notes)})",
        )  # fmt: skip
    check_runs(kept, 1)
    hardware = {case.name: min_host_overhead_s(case, base) for case in kept}
    names = {name for name, _ in hardware.values()}
    if len(names) > 1:
        raise InputError(
            SOURCE, "runs", f"the runs are on different hardware ({', '.join(sorted(names))}): fit each apart"
        )
    return kept, notes, names.pop(), min(overhead for _, overhead in hardware.values())


def fit_cases(  # noqa: PLR0913 (the runs, where they are, what to fit, and how: each told apart by name)
    all_cases: list[Case],
    base: Path,
    folder: Path,
    names: tuple[FactorName, ...],
    reports: list[str],
    deployment: str,
    progress: Callable[[str], None] = lambda _: None,
    cross_validate: bool = True,
    select_factors: bool = False,
    guard: bool = True,
    workers: int = 1,
) -> tuple[DeploymentCalibration, FitResult, list[str]]:
    """Fit the named factors to the runs that can be fitted (fitted_cases): every subset by cross-validation
    (select_factors, fit_select.select), else all of them, with cross-validation unless told otherwise; with
    it and `guard`, a fit that does not predict its held-out runs clearly better than none is not applied
    (fit_select.guarded). The runs of one evaluation are simulated in `workers` processes (the same fit). The
    calibration, the fit, and notes on the runs left out."""
    cases, notes, hardware, min_overhead = fitted_cases(all_cases, base)
    check_runs(cases, len(names))
    problem = Problem(cases, base, folder, hardware, names, min_overhead)
    evaluator = Evaluator(problem, progress, workers=workers)
    try:
        progress("checking that the runs identify every factor")
        check_effects(evaluator)
        if select_factors:
            result = select(evaluator, progress)
        else:
            result = fit(evaluator, progress, cross_validate)
            if cross_validate:
                result = guarded(result) if guard else judge(result)
    finally:
        evaluator.close()
    return calibration_of(result, problem, reports, deployment), result, notes


def metric_errors(result: FitResult) -> MetricErrors:
    return MetricErrors(
        in_sample=median_errors(result.in_sample),
        cross_validated=median_errors(result.cross_validated),
        unfitted=median_errors(result.unfitted),
    )


def not_applied(result: FitResult) -> NotApplied | None:
    """The fit that fit_select.guarded kept aside, for the calibration file."""
    rejected, verdict = result.rejected, result.verdict
    if rejected is None or verdict is None:
        return None
    return NotApplied(
        factors=rejected.factors,
        fitted=list(rejected.names),
        held_out_error=verdict.held_out,
        unfitted_error=verdict.unfitted,
        standard_error=verdict.standard_error,
        errors=metric_errors(rejected),
    )


def calibration_of(result: FitResult, problem: Problem, reports: list[str], deployment: str) -> DeploymentCalibration:
    errors = metric_errors(result)
    provenance = Provenance(
        deployment=deployment,
        reports=reports,
        runs=[case.name for case in problem.cases],
        folds=len(result.fold_factors),
        ttftsim_version=_version(),
    )
    return DeploymentCalibration(
        format="ttftsim-deployment-calibration",
        version=1,
        hardware=problem.hardware,
        factors=result.factors,
        fitted=list(result.names),
        intervals={
            name: FactorFit(low=low, high=high) for name in result.names for low, high in [result.interval(name)]
        },
        errors=errors,
        provenance=provenance,
        not_applied=not_applied(result),
    )


def write_calibration(calibration: DeploymentCalibration, out: Path) -> None:
    try:
        out.write_text(json.dumps(calibration.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(str(out), "", f"cannot write the calibration ({exc.strerror})") from None


def _version() -> str:
    try:
        return version("ttftsim")
    except PackageNotFoundError:
        return "unknown"


__all__ = ["SOURCE", "fit_cases", "fit_reports", "parse_factors", "write_calibration"]
