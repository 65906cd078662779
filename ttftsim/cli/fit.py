"""`ttftsim fit`: fit deployment factors to a team's benchmark reports and write a calibration file that
simulate, plan, validate and compare apply (engine.calibration)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ttftsim.cli.app import app, console
from ttftsim.errors import InputError

if TYPE_CHECKING:
    from ttftsim.accuracy.fit import FitResult
    from ttftsim.config.deployment_calibration import MetricErrors

DEFAULT_FACTORS = "gemm_efficiency_scale,attention_efficiency_scale,step_overhead_s,api_server_cost_scale"
ERROR_METRICS = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "ttft_mean", "tpot_mean")


@app.command()
def fit(
    reports: Annotated[
        list[Path],
        typer.Argument(
            help="Benchmark reports of one deployment (vllm bench serve, GuideLLM, inference-perf's folder, aiperf, "
            "genai-perf, vLLM /metrics, Prometheus query_range; told by content), at more than one load level"
        ),
    ],
    out: Annotated[Path, typer.Option("-o", "--out", help="Where the calibration file goes (JSON)")],
    deployment: Annotated[
        Path | None,
        typer.Option(
            help="The deployment the reports were measured on: a scenario file (model, hardware, engine); not for "
            "the measured-run files of ../shared/validation, which name their own"
        ),
    ] = None,
    factors: Annotated[
        str, typer.Option(help="Comma-separated factors to fit (the others stay neutral)")
    ] = DEFAULT_FACTORS,
    select: Annotated[
        bool,
        typer.Option(
            "--select",
            help="Fit every subset of the factors with cross-validation and keep the fewest factors that the best "
            "subset does not beat by more than one standard error (none kept: a neutral calibration); one fit per "
            "subset, slower",
        ),
    ] = False,
    apply_anyway: Annotated[
        bool,
        typer.Option(
            "--apply-anyway",
            help="Write the fitted factors even where they do not predict the runs each fold held out clearly better "
            "than none (by default the calibration is then neutral)",
        ),
    ] = False,
    before: Annotated[
        list[Path] | None,
        typer.Option(
            help="A /metrics snapshot taken before a /metrics report's run: that run is the difference (repeatable: "
            "the n-th goes with the n-th /metrics report)"
        ),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1, max=1024, help="Runs simulated in parallel in each evaluation (at most one per CPU; the same fit)"
        ),
    ] = 2,
) -> None:
    """Fit deployment factors (GEMM and attention efficiency, per-step host overhead, API-server cost) to
    measured runs, with cross-validation over runs, and write a calibration file (engine.calibration). A fit
    that does not predict the runs each fold held out clearly better than none is not applied: the calibration
    is then neutral, and the fitted values are printed."""
    from ttftsim.accuracy.fit_record import write_record
    from ttftsim.accuracy.fit_run import fit_reports, parse_factors, write_calibration

    names = parse_factors(factors)
    _check_out(out)  # said before the fit (a minute or more), not after it
    if select and apply_anyway:
        raise InputError(
            "--apply-anyway", "", "has no effect with --select (selection keeps what its folds show to help): give one"
        )

    def progress(line: str) -> None:
        sys.stderr.write(f"{line}\n")

    calibration, result, notes = fit_reports(
        reports,
        deployment,
        names,
        progress,
        select_factors=select,
        before=list(before or []),
        guard=not apply_anyway,
        workers=workers,
    )
    write_calibration(calibration, out)
    record = write_record(result, calibration, out)
    _print_selection(result)
    shown = result.rejected or result  # a fit not applied is still shown: its factors and errors
    _print_factors(shown, applied=result.rejected is None)
    errors = calibration.errors if calibration.not_applied is None else calibration.not_applied.errors
    assert errors is not None
    title = "median abs error     unfitted  in-sample  cross-validated"
    _line(title + ("  (the fit not applied)" if result.rejected else ""))
    for metric in ERROR_METRICS:
        if metric in errors.in_sample:
            cells = (errors.unfitted.get(metric), errors.in_sample.get(metric), errors.cross_validated.get(metric))
            _line(f"{metric:<19}" + "".join(f"{_percent(cell):>11}" for cell in cells))
    worse = worse_than_unfitted(errors) if result.names else []
    if worse:
        _line(
            f"warning: the cross-validated error is above the unfitted model's on {', '.join(worse)}: on runs it was "
            "not fitted to, the calibration predicts worse than none (the factors fit these runs' noise, or stand in "
            "for a mechanism ttftsim lacks)"
        )
    _print_verdict(result)
    for note in notes:
        _line(f"note: {note}")  # paths unbroken
    runs = len(calibration.provenance.runs) if calibration.provenance else 0
    use = "neutral: it changes no prediction" if not result.names else f"use it with engine: calibration: {out.name}"
    _line(f"wrote {out} ({runs} runs, {len(result.fold_factors)} folds); {use}")
    _line(f"wrote {record} (each run's predictions, for the dashboard's Fit view)")


def _line(text: str) -> None:
    """One line of output, unbroken whatever the terminal's width."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _print_factors(result: FitResult, applied: bool) -> None:
    if not result.names:
        return
    _line(
        "factor                        fitted     range over CV folds and the fit"
        + ("" if applied else "  (not applied)")
    )
    for name in result.names:
        low, high = result.interval(name)
        value = getattr(result.factors, name)
        _line(f"{name:<28}{_value(name, value):>9}     {_value(name, low)} .. {_value(name, high)}")
    for name, bound in result.at_bounds():
        _line(
            f"{_stopped(name, bound)}: the hardware profile is far from these runs, or not of their shape; a profile "
            "measured on this hardware predicts better than a fit can (docs/fit.md, What fit refuses and says)"
        )
    folds = len(result.fold_factors)
    for name, bound, count in result.folds_at_bounds():
        _line(
            f"{_stopped(name, bound)} in {count} of {folds} cross-validation folds: the runs those folds kept pull it "
            "past what the model allows, so the range above is cut there"
        )


def _stopped(name: str, bound: float) -> str:
    """'warning: NAME stopped at its bound (BOUND[, why])'."""
    overhead = name == "step_overhead_s"
    why = ", no host time left in the cheapest step" if overhead and bound < 0 else ""
    return f"warning: {name} stopped at its bound ({_value(name, bound) if overhead else f'{bound:g}'}{why})"


def _print_selection(result: FitResult) -> None:
    """--select: each set of factors tried with its mean held-out error, and why the calibration is neutral if
    it is."""
    if not result.selection:
        return
    _line("selection     mean held-out abs error per run")
    for subset, score in result.selection:
        _line(f"  {_percent(score):>8}  {', '.join(subset) or '(none: unfitted)'}")
    if not result.names:
        _line(
            "no set of factors predicts the runs left out of its fit clearly better than none: the calibration "
            "is neutral"
        )


def _print_verdict(result: FitResult) -> None:
    """Whether the fit predicts the runs its folds held out clearly better than none, and what was written."""
    verdict = result.verdict
    if verdict is None:
        return
    difference = verdict.held_out - verdict.unfitted
    line = (
        f"held-out runs: mean abs error per run {_percent(verdict.held_out).strip()} with the fit, "
        f"{_percent(verdict.unfitted).strip()} without (difference {difference * 100:+.1f} points, standard error "
        f"{verdict.standard_error * 100:.1f})"
    )
    if verdict.clear:
        _line(f"{line}: clearly better, applied")
    elif result.rejected is not None:
        _line(
            f"{line}: not better by more than its standard error, so not applied: the calibration is neutral "
            "(--apply-anyway writes the fit; --select tries each subset of the factors)"
        )
    else:
        _line(f"{line}: not better by more than its standard error; written anyway (--apply-anyway)")


def worse_than_unfitted(errors: MetricErrors) -> list[str]:
    """The metrics whose cross-validated median error exceeds the unfitted model's (in ERROR_METRICS order)."""
    return [
        metric
        for metric in ERROR_METRICS
        if metric in errors.cross_validated
        and metric in errors.unfitted
        and errors.cross_validated[metric] > errors.unfitted[metric]
    ]


def _value(name: str, value: float) -> str:
    return f"{value * 1e3:+.2f} ms" if name == "step_overhead_s" else f"{value:.3f}"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _check_out(out: Path) -> None:
    """The calibration file can be written: its folder exists and is writable, and it is not a folder."""
    folder = out.parent
    if out.is_dir():
        raise InputError(str(out), "--out", "is a folder; give the calibration file's name (my-cluster.json)")
    if not folder.is_dir():
        raise InputError(str(out), "--out", f"no folder {folder}")
    if not os.access(folder, os.W_OK):
        raise InputError(str(out), "--out", f"cannot write in {folder}")
