"""The per-run record of a fit: `ttftsim fit -o my-cluster.json` writes my-cluster.runs.json beside the
calibration file. A calibration holds the factors, their ranges and the median errors; the record holds
what they summarise: every run's measured values and its predictions without the fit (neutral factors), by
the fit on every run (in-sample) and by the fold fit that left the run out (cross-validated), each with the
accuracy harness's 95% intervals (harness.open_loop_intervals / closed_loop_intervals: the seeds pooled),
and each fold's factors and held-out runs. The dashboard's fit view reads it (ttftsim/accuracy_view.py).

Format `ttftsim-fit-runs`, version 1 (JSON, keys sorted; a prediction of an overloaded run may be Infinity,
as in `ttftsim accuracy --json`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ttftsim.accuracy.fit import FitResult, folds_of
from ttftsim.accuracy.harness import StageResult
from ttftsim.config.deployment_calibration import DeploymentCalibration, Factors
from ttftsim.errors import InputError
from ttftsim.metrics.intervals import CONFIDENCE

FORMAT = "ttftsim-fit-runs"
VERSION = 1


class _Record(BaseModel):
    """Strict like an input schema, but a prediction may be infinite (an overloaded run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Bounds(_Record):
    """A 95% interval (metrics/intervals.py Interval): None on a side that is unbounded or unknown."""

    lo: float | None
    hi: float | None
    coverage: float | None
    basis: str


class MetricBounds(_Record):
    measured: Bounds
    predicted: Bounds
    overlap: bool | None


class Prediction(_Record):
    """One run's predicted values (s) under one set of factors, and the intervals of both sides."""

    predicted: dict[str, float]
    intervals: dict[str, MetricBounds]


class StageRecord(_Record):
    run: str
    stage: str
    fold: int | None = Field(ge=1)  # the fold that held the run out; None without cross-validation
    measured: dict[str, float]
    measured_overloaded: bool
    measured_client_bound: bool = False  # the client timed its first tokens with the last (not fitted to)
    unfitted: Prediction
    in_sample: Prediction
    cross_validated: Prediction | None


class FoldRecord(_Record):
    number: int = Field(ge=1)
    held_out: list[str]
    factors: Factors


class FitRecord(_Record):
    format: Literal["ttftsim-fit-runs"]
    version: Literal[1]
    calibration: str = Field(description="The calibration file's name (beside this record)")
    factors: Factors = Field(description="The fit on every run: the calibration's factors when they belong together")
    confidence: float = Field(gt=0, lt=1)
    folds: list[FoldRecord]
    stages: list[StageRecord]


def record_path(calibration: Path) -> Path:
    """Where the record of a calibration file goes: beside it, my-cluster.json -> my-cluster.runs.json."""
    stem = calibration.name.removesuffix(".json")
    return calibration.with_name(f"{stem}.runs.json")


def _prediction(result: StageResult) -> Prediction:
    intervals = {k: MetricBounds.model_validate(asdict(v)) for k, v in result.intervals.items()}
    return Prediction(predicted=result.predicted, intervals=intervals)


def fit_record(result: FitResult, runs: list[str], calibration: DeploymentCalibration, name: str) -> FitRecord:
    """The record of a fit of the named runs (in the fit's order) that wrote the calibration file `name`.
    Without cross-validation (fewer fold fits than folds), no run has a fold and nothing is held out."""
    folds = folds_of(len(runs))
    cross_validated = len(result.fold_factors) == len(folds)
    fold_of = {run: number for number, fold in enumerate(folds, start=1) for run in fold} if cross_validated else {}
    stages, position = [], 0
    for unfitted, in_sample, held_out in zip(result.unfitted, result.in_sample, result.cross_validated, strict=True):
        assert (unfitted.case, unfitted.stage) == (in_sample.case, in_sample.stage) == (held_out.case, held_out.stage)
        while runs[position] != in_sample.case:  # the results run in run order: two runs of one name stay apart
            position += 1
        stage = StageRecord(
            run=in_sample.case,
            stage=in_sample.stage,
            fold=fold_of.get(position),
            measured=in_sample.measured,
            measured_overloaded=in_sample.measured_overloaded,
            measured_client_bound=in_sample.measured_client_bound,
            unfitted=_prediction(unfitted),
            in_sample=_prediction(in_sample),
            cross_validated=_prediction(held_out) if cross_validated else None,
        )
        stages.append(stage)
    fold_records = (
        [
            FoldRecord(number=number, held_out=[runs[i] for i in fold], factors=factors)
            for number, (fold, factors) in enumerate(zip(folds, result.fold_factors, strict=True), start=1)
        ]
        if cross_validated
        else []
    )
    return FitRecord(
        format=FORMAT,
        version=VERSION,
        calibration=name,
        factors=calibration.factors,
        confidence=CONFIDENCE,
        folds=fold_records,
        stages=stages,
    )


def write_record(result: FitResult, calibration: DeploymentCalibration, out: Path) -> Path:
    """Write the record beside the calibration file `out`; its path."""
    runs = calibration.provenance.runs if calibration.provenance is not None else []
    path = record_path(out)
    document = fit_record(result, runs, calibration, out.name).model_dump()  # Infinity stays Infinity
    try:
        path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), "", f"cannot write the fit's record ({exc.strerror})") from None
    return path
