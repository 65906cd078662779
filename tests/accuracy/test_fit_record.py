"""The fit's per-run record (accuracy/fit_record.py): which fold held each run out, the three predictions with
their intervals, the folds' factors; written beside the calibration and read back by its schema."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ttftsim.accuracy.fit import FitResult
from ttftsim.accuracy.fit_record import FitRecord, fit_record, record_path, write_record
from ttftsim.accuracy.harness import MetricInterval, StageResult
from ttftsim.config.deployment_calibration import DeploymentCalibration, Factors, Provenance
from ttftsim.metrics.intervals import Interval

RUNS = ["a", "b", "c"]
MEASURED = Interval(0.09, 0.12, 0.95, "reported percentiles")


def stage(run: str, ttft_p50_s: float) -> StageResult:
    predicted = Interval(ttft_p50_s - 0.01, ttft_p50_s + 0.01, 0.95, "order statistics")
    interval = MetricInterval.of(MEASURED, predicted)
    return StageResult(
        run, f"{run} stage", {"ttft_p50": 0.1}, {"ttft_p50": ttft_p50_s}, False, False, {"ttft_p50": interval}
    )


def result(folds: int) -> FitResult:
    fitted = Factors(gemm_efficiency_scale=0.5)
    fold_factors = [Factors(gemm_efficiency_scale=0.4 + 0.1 * i) for i in range(folds)]
    unfitted = [stage(run, 0.2) for run in RUNS]
    in_sample = [stage(run, 0.1 + 0.001 * i) for i, run in enumerate(RUNS)]
    held_out = [stage("a", 0.125), stage("b", float("inf")), stage("c", 0.09)] if folds > 1 else in_sample
    return FitResult(("gemm_efficiency_scale",), fitted, fold_factors, unfitted, in_sample, held_out)


def calibration() -> DeploymentCalibration:
    provenance = Provenance(deployment="deploy.yaml", reports=["r.json"], runs=RUNS, folds=3, ttftsim_version="t")
    return DeploymentCalibration(
        format="ttftsim-deployment-calibration",
        version=1,
        hardware="CPU-host",
        factors=Factors(gemm_efficiency_scale=0.5),
        provenance=provenance,
    )


def test_each_run_is_held_out_by_its_own_fold_with_that_folds_prediction() -> None:
    record = fit_record(result(3), RUNS, calibration(), "my.json")
    assert [(s.run, s.fold) for s in record.stages] == [("a", 1), ("b", 2), ("c", 3)]  # leave-one-out
    assert [f.held_out for f in record.folds] == [["a"], ["b"], ["c"]]
    assert [f.factors.gemm_efficiency_scale for f in record.folds] == [0.4, 0.5, 0.6000000000000001]
    first = record.stages[0]
    assert first.in_sample.predicted == {"ttft_p50": 0.1} and first.unfitted.predicted == {"ttft_p50": 0.2}
    assert first.cross_validated is not None and first.cross_validated.predicted == {"ttft_p50": 0.125}
    bounds = first.cross_validated.intervals["ttft_p50"]
    assert (bounds.measured.lo, bounds.measured.hi) == (0.09, 0.12)
    assert (bounds.predicted.lo, bounds.predicted.hi) == (0.125 - 0.01, 0.125 + 0.01)
    assert bounds.overlap is True  # 115..135 ms meets 90..120 ms
    assert record.factors == calibration().factors and record.calibration == "my.json"


def test_two_runs_of_one_name_keep_their_own_folds() -> None:
    runs = ["a", "b", "a"]  # two reports of the same file name in different folders
    fit = result(3)
    renamed = [
        [replace(s, case=run) for s, run in zip(side, runs, strict=True)]
        for side in (fit.unfitted, fit.in_sample, fit.cross_validated)
    ]
    fit = replace(fit, unfitted=renamed[0], in_sample=renamed[1], cross_validated=renamed[2])
    record = fit_record(fit, runs, calibration(), "my.json")
    assert [(s.run, s.fold) for s in record.stages] == [("a", 1), ("b", 2), ("a", 3)]


def test_without_cross_validation_nothing_is_held_out() -> None:
    record = fit_record(result(1), RUNS, calibration(), "my.json")
    assert record.folds == [] and {s.fold for s in record.stages} == {None}
    assert {s.cross_validated for s in record.stages} == {None}


def test_the_record_goes_beside_the_calibration_and_reads_back(tmp_path: Path) -> None:
    assert record_path(Path("out/my-cluster.json")) == Path("out/my-cluster.runs.json")
    assert record_path(Path("cal")) == Path("cal.runs.json")
    path = write_record(result(3), calibration(), tmp_path / "my-cluster.json")
    assert path == tmp_path / "my-cluster.runs.json"
    text = path.read_text()
    assert '"ttft_p50": Infinity' in text  # run b's held-out prediction: overloaded, kept as JSON's Infinity
    read = FitRecord.model_validate(json.loads(text))
    assert read == fit_record(result(3), RUNS, calibration(), "my-cluster.json")
