"""The dashboard's fit view (web/page_fit.py draws it): a calibration file written by `ttftsim fit`, inside the
results folder, and the record the fit wrote beside it (accuracy/fit_record.py), as rows to draw: the fitted
factors with their range over the cross-validation folds, the median errors, and per run and metric the
measured value with its 95% sampling interval beside the predictions with theirs: in-sample (the fit on
every run), held out (the fold fit that left the run out) and without the fit.

Plain Python (no Dash), tested without a browser. Nothing outside the results folder is read (results.inside:
links followed). A file that cannot be shown is a ResultError of one line naming the file and the field; a
calibration without a record (hand-written, or fitted before fits kept one) shows its factors and errors,
with a line that says why the runs are missing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttftsim.accuracy.fit_record import FitRecord, Prediction, StageRecord, record_path
from ttftsim.config.deployment_calibration import FACTOR_NAMES, DeploymentCalibration, FactorName
from ttftsim.config.loading import parse_mapping
from ttftsim.errors import InputError
from ttftsim.inputs.files import read_text
from ttftsim.inputs.structured import parse_json
from ttftsim.results import ResultError, inside

CALIBRATION_FORMAT = "ttftsim-deployment-calibration"
METRICS = {
    "ttft_p50": "TTFT P50",
    "ttft_p90": "TTFT P90",
    "ttft_p99": "TTFT P99",
    "tpot_p50": "TPOT P50",
    "ttft_mean": "TTFT mean",
    "tpot_mean": "TPOT mean",
}


@dataclass(frozen=True)
class Estimate:
    """A value (s) and its 95% interval; None where there is none (a side unbounded, or not reported)."""

    value_s: float | None
    lo_s: float | None = None
    hi_s: float | None = None


@dataclass(frozen=True)
class RunMetric:
    """One metric of one run: measured, and predicted three ways. held_out is None without cross-validation."""

    run: str
    stage: str
    metric: str
    fold: int | None
    is_overloaded: bool  # measured as overloaded: left out of the fit and of its errors
    is_client_bound: bool  # its client timed first tokens with the last: left out of the fit and of its errors
    measured: Estimate
    in_sample: Estimate
    held_out: Estimate | None
    unfitted: Estimate


@dataclass(frozen=True)
class FactorRow:
    name: str
    value: float
    low: float | None  # the range over the folds and the fit on every run; None when not fitted
    high: float | None
    is_fitted: bool


@dataclass(frozen=True)
class FitView:
    calibration: str  # the file, relative to the results folder
    hardware: str
    factors: list[FactorRow]
    errors: dict[str, dict[str, float | None]]  # metric -> unfitted, in_sample, cross_validated (0.1 = 10 %)
    runs: list[RunMetric]
    note: str  # what the factors were fitted to, or why the runs are missing
    neutral: bool = False  # the fit was not kept: the errors' fitted sides are its, the runs the unfitted model's


def find_calibrations(root: Path) -> list[str]:
    """The calibration files in the results folder (by their format field), relative, sorted; hidden entries
    and anything resolving outside the folder are skipped, unreadable files too (a path typed in the view
    still shows why)."""
    base = root.resolve()
    found = []
    for path in sorted(base.rglob("*.json")) if base.is_dir() else []:
        relative = path.relative_to(base)
        if any(part.startswith(".") for part in relative.parts) or base not in path.resolve().parents:
            continue
        try:
            head = parse_json(read_text(path.resolve(), what="calibration"), str(relative), finite=False)
        except (InputError, OSError):
            continue
        if isinstance(head, dict) and head.get("format") == CALIBRATION_FORMAT:
            found.append(relative.as_posix())
    return found


def _mapping(root: Path, relative: str, what: str) -> dict[str, Any]:
    path = inside(root, relative)
    if not path.is_file():
        raise ResultError(f"{relative}: not found (or not a file)")
    try:
        data = parse_json(read_text(path, what=what), relative, finite=False)
    except InputError as exc:  # the loader's bounds: size, UTF-8, nesting, duplicate keys, not JSON
        raise ResultError(exc.one_line()) from None
    if not isinstance(data, dict):
        raise ResultError(f"{relative}: expected a JSON object")
    return data


def _parsed(schema: Any, data: dict[str, Any], relative: str) -> Any:
    try:
        return parse_mapping(schema, data, relative)
    except InputError as exc:
        raise ResultError(exc.one_line()) from None


def load_fit_view(root: Path, relative: str) -> FitView:
    """The view of a calibration file inside root, with its record when it has one."""
    if not isinstance(relative, str) or not relative.strip():
        raise ResultError("pick or type a calibration file (a path inside the results folder)")
    calibration: DeploymentCalibration = _parsed(
        DeploymentCalibration, _mapping(root, relative, "calibration"), relative
    )
    factors = [_factor_row(calibration, name) for name in FACTOR_NAMES]
    errors: dict[str, dict[str, float | None]] = {}
    rejected = calibration.not_applied  # a fit not kept: the file's factors and errors are neutral
    if calibration.errors is not None:
        sides = calibration.errors.model_dump()
        fitted = rejected.errors.model_dump() if rejected is not None else sides  # as `ttftsim fit` prints them
        for metric in [m for m in METRICS if m in calibration.errors.in_sample]:
            errors[metric] = {"unfitted": sides["unfitted"].get(metric)} | {
                side: fitted[side].get(metric) for side in ("in_sample", "cross_validated")
            }
    record_name = record_path(Path(relative)).as_posix()
    if not inside(root, record_name).is_file():
        why = "written by hand, or by a ttftsim fit that kept no record"
        note = f"no per-run predictions: {record_name} is not beside it ({why}); the factors and errors are the file's"
        return FitView(relative, calibration.hardware, factors, errors, [], note, rejected is not None)
    record: FitRecord = _parsed(FitRecord, _mapping(root, record_name, "fit record"), record_name)
    if record.factors != calibration.factors:
        raise ResultError(f"{record_name}: factors: not those of {relative} (a record of another fit): refit")
    runs = [row for stage in record.stages for row in _run_metrics(stage)]
    note = _note(calibration, record)
    return FitView(relative, calibration.hardware, factors, errors, runs, note, rejected is not None)


def _factor_row(calibration: DeploymentCalibration, name: FactorName) -> FactorRow:
    interval = calibration.intervals.get(name)
    value = float(getattr(calibration.factors, name))
    fitted = name in calibration.fitted
    return FactorRow(
        name, value, None if interval is None else interval.low, None if interval is None else interval.high, fitted
    )


def _estimate(prediction: Prediction | None, metric: str) -> Estimate | None:
    if prediction is None:
        return None
    bounds = prediction.intervals.get(metric)
    value = prediction.predicted.get(metric)
    if bounds is None:
        return Estimate(value)
    return Estimate(value, bounds.predicted.lo, bounds.predicted.hi)


def _run_metrics(stage: StageRecord) -> list[RunMetric]:
    """The stage's metrics that were measured and predicted, in METRICS order (a closed loop's means, else the
    percentiles and the TTFT mean)."""
    rows = []
    for metric in (m for m in METRICS if m in stage.measured and m in stage.in_sample.predicted):
        bounds = stage.in_sample.intervals.get(metric)
        measured = Estimate(stage.measured[metric])
        if bounds is not None and bounds.measured.coverage is not None:  # a reported mean is a point: none
            measured = Estimate(stage.measured[metric], bounds.measured.lo, bounds.measured.hi)
        in_sample, unfitted = _estimate(stage.in_sample, metric), _estimate(stage.unfitted, metric)
        assert in_sample is not None and unfitted is not None
        held_out = _estimate(stage.cross_validated, metric)
        rows.append(
            RunMetric(
                stage.run,
                stage.stage,
                metric,
                stage.fold,
                stage.measured_overloaded,
                stage.measured_client_bound,
                measured,
                in_sample,
                held_out,
                unfitted,
            )
        )
    return rows


def _note(calibration: DeploymentCalibration, record: FitRecord) -> str:
    provenance = calibration.provenance
    runs = len({stage.run for stage in record.stages})
    where = f" on {provenance.deployment}" if provenance is not None else ""
    folds = f"{len(record.folds)} cross-validation folds" if record.folds else "no cross-validation"
    note = f"fitted on {runs} runs{where} ({calibration.hardware}), {folds}; intervals {record.confidence:.0%}"
    rejected = calibration.not_applied
    if rejected is None:
        return note
    values = ", ".join(f"{name} {getattr(rejected.factors, name):.3g}" for name in rejected.fitted)
    return (
        f"{note}; neutral: the fit ({values}) was not applied, its held-out runs' mean error "
        f"{rejected.held_out_error:.1%} against {rejected.unfitted_error:.1%} without it (standard error "
        f"{rejected.standard_error:.1%}), so every prediction here is the unfitted model's"
    )


def error_of(estimate: Estimate | None, measured: Estimate) -> float | None:
    """Relative error of a prediction against the measurement (None when either is missing or not finite)."""
    if estimate is None or estimate.value_s is None or not measured.value_s:
        return None
    if estimate.value_s in (float("inf"), float("-inf")):
        return None
    return (estimate.value_s - measured.value_s) / measured.value_s


def _ms(estimate: Estimate | None) -> str:
    """'59.0 [41.2, 70.3]' in ms; a side without a bound is '?'; no interval at all: the value alone."""
    if estimate is None or estimate.value_s is None:
        return "-"
    text = "overloaded" if estimate.value_s == float("inf") else f"{estimate.value_s * 1e3:,.1f}"
    if estimate.lo_s is None and estimate.hi_s is None:
        return text
    lo, hi = ("?" if v is None else f"{v * 1e3:,.1f}" for v in (estimate.lo_s, estimate.hi_s))
    return f"{text} [{lo}, {hi}]"


def _left_out(row: RunMetric) -> str:
    """Why the row was not fitted to, if it was not (fit_run.fitted_cases, fit.fitted_ratios)."""
    if row.is_overloaded:
        return " (overloaded: not fitted)"
    if row.is_client_bound:
        return " (client-bound: not fitted)"
    return ""


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def table_rows(view: FitView) -> list[dict[str, Any]]:
    """One row per run and metric, in ms with 95% intervals in brackets, the held-out fold named."""
    rows = []
    for row in view.runs:
        held = "-" if row.fold is None else f"fold {row.fold}"
        rows.append(
            {
                "run": row.run if row.stage in ("", row.run) else f"{row.run} / {row.stage}",
                "metric": METRICS[row.metric] + _left_out(row),
                "measured": _ms(row.measured),
                "in_sample": _ms(row.in_sample),
                "in_sample_error": _percent(error_of(row.in_sample, row.measured)),
                "held_out": _ms(row.held_out),
                "held_out_error": _percent(error_of(row.held_out, row.measured)),
                "held_out_in": held,
                "unfitted": _ms(row.unfitted),
                "unfitted_error": _percent(error_of(row.unfitted, row.measured)),
            }
        )
    return rows


COLUMNS = (
    ("run", "run"),
    ("metric", "metric"),
    ("measured", "measured (ms) [95%]"),
    ("in_sample", "in-sample (ms) [95%]"),
    ("in_sample_error", "in-sample error"),
    ("held_out", "held out (ms) [95%]"),
    ("held_out_error", "held-out error"),
    ("held_out_in", "held out in"),
    ("unfitted", "without the fit (ms)"),
    ("unfitted_error", "without the fit: error"),
)


def factor_rows(view: FitView) -> list[dict[str, Any]]:
    """The factors: value, range over the folds (fitted ones), or neutral (not fitted)."""
    rows = []
    for row in view.factors:
        show = _overhead if row.name == "step_overhead_s" else _scale
        interval = "-" if row.low is None or row.high is None else f"{show(row.low)} .. {show(row.high)}"
        rows.append(
            {
                "factor": row.name,
                "value": show(row.value),
                "range": interval,
                "fitted": "yes" if row.is_fitted else "no (neutral)",
            }
        )
    return rows


def error_rows(view: FitView) -> list[dict[str, Any]]:
    """The median errors per metric; where the fit was not kept, the in-sample and cross-validated ones are that
    fit's (as `ttftsim fit` prints them), and say so: the file's predictions are the unfitted model's."""
    return [
        {"metric": METRICS[metric]}
        | {side: "-" if v is None else f"{v:.1%}" + _kept(view, side) for side, v in sides.items()}
        for metric, sides in view.errors.items()
    ]


def _kept(view: FitView, side: str) -> str:
    return " (fit not kept)" if view.neutral and side != "unfitted" else ""


def _overhead(value: float) -> str:
    return f"{value * 1e3:+.2f} ms"


def _scale(value: float) -> str:
    return f"{value:.3f}"
