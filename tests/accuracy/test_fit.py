"""`ttftsim fit`: the factors inside the cost models (known answers), a fit that recovers factors a simulation
was run with, cross-validation folds, and the refusals (one line)."""

from __future__ import annotations

import json
import shutil
import statistics
import warnings
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim.accuracy.fit import Evaluator, Problem, folds_of, residuals_of, to_factors, to_vector
from ttftsim.accuracy.fit_checks import check_effects
from ttftsim.accuracy.fit_record import FitRecord, write_record
from ttftsim.accuracy.fit_run import (
    fit_cases,
    fit_reports,
    fitted_cases,
    parse_factors,
    unique_names,
    write_calibration,
)
from ttftsim.accuracy.ground_truth import Case, StageTruth, case_notes
from ttftsim.accuracy.harness import StageResult, run_case
from ttftsim.accuracy_view import load_fit_view
from ttftsim.calibration.factors import ScaledKernelCosts, scaled_api_server, scaled_linear
from ttftsim.config.deployment_calibration import DeploymentCalibration, FactorName, Factors
from ttftsim.config.scenario import Scenario
from ttftsim.config.versions import ApiServerCosts
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.kernels import AttentionShape, RooflineCosts
from ttftsim.perf.linear import LinearStepModel
from ttftsim.replica import build_replica

REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"
MODEL = str(REPORTS / "cpu-server-model" / "config.json")
STEP = {"fixed_s": 0.006, "per_token_s": 1e-4, "per_decode_token_s": 5e-4, "per_kv_token_s": 0.0, "source": "test"}
API = {"per_request_s": 0.002, "per_prompt_token_s": 5e-6, "per_output_token_s": 6e-5, "per_step_s": 5e-4}


def calibration_file(folder: Path, hardware: str = "CPU-host", **factors: float) -> Path:
    path = folder / "cal.json"
    document = {"format": "ttftsim-deployment-calibration", "version": 1, "hardware": hardware, "factors": factors}
    path.write_text(json.dumps(document))
    return path


def scenario(rate: float, calibration: str | None = None, num_requests: int = 24, **step: float) -> Scenario:
    return Scenario.model_validate(
        {
            "name": f"{rate:g} req/s",
            "model": MODEL,
            "hardware": "CPU-host",
            "engine": {
                "vllm_version": "0.32",
                "block_size": 32,
                "max_num_batched_tokens": 512,
                "max_num_seqs": 32,
                "max_model_len": 2048,
                "num_gpu_blocks_override": 2730,
                "api_server": API,
                "calibration": calibration,
            },
            "workload": {
                "type": "synthetic",
                "arrivals": {"type": "constant", "rate": rate},
                "prompt_tokens": {"type": "fixed", "value": 256},
                "output_tokens": {"type": "fixed", "value": 8},
                "num_requests": num_requests,
            },
            "measured_step_cost": STEP | step,
        }
    )


# ---- the factors inside the cost models ----


def test_scaled_linear_divides_token_terms_and_adds_overhead() -> None:
    model = LinearStepModel(0.006, 1e-4, 2e-6, 1e-8, 5e-4)
    scaled = scaled_linear(
        model, Factors(gemm_efficiency_scale=0.5, attention_efficiency_scale=0.25, step_overhead_s=0.004)
    )
    assert scaled == LinearStepModel(0.010, 2e-4, 8e-6, 4e-8, 1e-3)
    # 100 prefill tokens, 2 decodes, 1,000 KV tokens: 0.010 + 100 x 2e-4 + 2 x 1e-3 + 1,000 x 8e-6
    shape = BatchShape(prefill_tokens=100, num_prefill_seqs=1, num_decode_seqs=2, decode_kv_tokens=1000)
    assert scaled.time_s(shape) == pytest.approx(0.010 + 0.020 + 0.002 + 0.008)


def test_overhead_never_takes_the_fixed_term_below_zero() -> None:
    with pytest.warns(
        UserWarning, match=r"step_overhead_s -10.00 ms takes the measured step cost's fixed_s \(6.00 ms\)"
    ):
        assert scaled_linear(LinearStepModel(0.006), Factors(step_overhead_s=-0.01)).fixed_s == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # at the bound fit uses, no warning
        assert scaled_linear(LinearStepModel(0.006), Factors(step_overhead_s=-0.006)).fixed_s == 0.0


def test_scaled_kernel_costs_scale_gemm_and_attention_only() -> None:
    roofline = RooflineCosts(load_hardware("H100-SXM5-80GB"))
    scaled = ScaledKernelCosts(roofline, gemm_scale=0.5, attention_scale=0.8)
    shape = AttentionShape(q_heads=32, kv_heads=8, head_dim=128, kv_bytes=2)
    assert scaled.gemm_s(512, 4096, 4096, "bf16", 4096 * 4096 * 2.0) == pytest.approx(
        2 * roofline.gemm_s(512, 4096, 4096, "bf16", 4096 * 4096 * 2.0)
    )
    assert scaled.decode_attention_s(8, 8000, shape) == pytest.approx(roofline.decode_attention_s(8, 8000, shape) / 0.8)
    kv = np.array([1000.0, 2000.0])
    np.testing.assert_allclose(
        scaled.decode_attention_many_s(2, kv, shape), roofline.decode_attention_many_s(2, kv, shape) / 0.8
    )
    assert scaled.memory_s(1e6) == roofline.memory_s(1e6)


def test_api_server_costs_scale_together() -> None:
    costs = scaled_api_server(ApiServerCosts(**API), Factors(api_server_cost_scale=2.0))
    assert (costs.per_request_s, costs.per_prompt_token_s, costs.per_output_token_s, costs.per_step_s) == (
        0.004,
        1e-5,
        1.2e-4,
        1e-3,
    )


def test_build_replica_applies_the_calibration_file(tmp_path: Path) -> None:
    calibration_file(tmp_path, gemm_efficiency_scale=0.5, step_overhead_s=0.002, api_server_cost_scale=3.0)
    replica = build_replica(scenario(2.0, "cal.json"), tmp_path)  # relative to the scenario's folder
    assert replica.cost == LinearStepModel(0.008, 2e-4, 0.0, 0.0, 1e-3)
    assert replica.engine.api_server.per_request_s == pytest.approx(0.006)
    assert "deployment factors of cal.json" in replica.kernel_costs


def test_calibration_on_other_hardware_is_refused(tmp_path: Path) -> None:
    calibration_file(tmp_path, hardware="H100-SXM5-80GB")
    with pytest.raises(InputError) as caught:
        build_replica(scenario(2.0, "cal.json"), tmp_path)
    assert caught.value.source == str(tmp_path / "cal.json") and caught.value.field == "hardware"


def test_bad_calibration_file_is_one_line_through_simulate(tmp_path: Path) -> None:
    path = calibration_file(tmp_path, gemm_efficiency_scale=0.5)
    path.write_text(path.read_text().replace('"version": 1', '"version": 7'))
    spec = scenario(2.0, "cal.json").model_dump(mode="json")
    (tmp_path / "scenario.json").write_text(json.dumps(spec))
    _assert_one_line_error(run("simulate", str(tmp_path / "scenario.json")), "cal.json", "version")


# ---- the fit ----


def measured_case(rate: float, factors: Factors, folder: Path) -> Case:
    """A run 'measured' by simulating it with known factors: its percentiles become the truth."""
    path = calibration_file(folder, **factors.model_dump())
    truth = StageTruth(f"{rate:g} req/s", 0.0, float("inf"), {})
    simulated = run_case(Case("truth", scenario(rate, str(path)), [truth]))[0]
    metrics = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50")
    measured = {metric: simulated.predicted[metric] for metric in metrics}
    return Case(f"{rate:g} req/s", scenario(rate), [replace(truth, measured=measured)])


def test_fit_recovers_the_factors_the_runs_were_simulated_with(tmp_path: Path) -> None:
    true = Factors(gemm_efficiency_scale=0.5, step_overhead_s=0.004)
    cases = [measured_case(rate, true, tmp_path) for rate in (2.0, 8.0, 20.0)]
    names: tuple[FactorName, ...] = ("gemm_efficiency_scale", "step_overhead_s")
    calibration, result, notes = fit_cases(cases, Path(), tmp_path, names, [], "test")
    assert result.factors.gemm_efficiency_scale == pytest.approx(0.5, rel=0.03)
    assert result.factors.step_overhead_s == pytest.approx(0.004, abs=3e-4)
    assert calibration.errors is not None and calibration.errors.in_sample["ttft_p50"] < 0.01
    assert calibration.errors.unfitted["ttft_p50"] > 0.3  # the neutral factors were far off
    assert len(result.fold_factors) == 3 and notes == []
    low, high = result.interval("gemm_efficiency_scale")
    assert low <= high and low == pytest.approx(0.5, rel=0.05)
    # the held-out runs are predicted far better than unfitted: the fit is applied, with its verdict
    assert result.rejected is None and calibration.not_applied is None and result.verdict is not None
    assert result.verdict.clear and result.verdict.unfitted > 0.3 > 0.01 > result.verdict.held_out
    # a fold is fitted as if its held-out run did not exist: the same factors as a fit on the other runs alone
    alone = fit_cases(cases[1:], Path(), tmp_path, names, [], "test", cross_validate=False)[1]
    assert result.fold_factors[0] == alone.factors
    # the runs of each evaluation simulated in two processes: the same fit, the same predictions
    parallel = fit_cases(cases, Path(), tmp_path, names, [], "test", workers=2)[1]
    assert (parallel.factors, parallel.fold_factors) == (result.factors, result.fold_factors)
    assert parallel.cross_validated == result.cross_validated and parallel.verdict == result.verdict


def test_a_fit_that_predicts_held_out_runs_no_better_than_none_is_not_applied(tmp_path: Path) -> None:
    # the neutral model is exact on two runs; the third measured 40 % slower than any factor explains (its noise)
    cases = [measured_case(rate, Factors(), tmp_path) for rate in (2.0, 8.0, 20.0)]
    odd = cases[2].stages[0]
    cases[2] = replace(cases[2], stages=[replace(odd, measured={k: v * 1.4 for k, v in odd.measured.items()})])
    names: tuple[FactorName, ...] = ("gemm_efficiency_scale", "step_overhead_s")
    fitted = fit_cases(cases, Path(), tmp_path, names, [], "test", guard=False)[1]
    calibration, result, _ = fit_cases(cases, Path(), tmp_path, names, [], "test")
    assert result.names == () and result.factors == Factors() and calibration.fitted == []
    assert result.rejected is not None and result.rejected.factors == fitted.factors != Factors()  # kept aside
    assert result.rejected.min_overhead_s == fitted.min_overhead_s == 0.006  # its bounds are still told (fixed_s)
    verdict = result.verdict
    assert verdict is not None and verdict == fitted.verdict and not verdict.clear  # --apply-anyway: same verdict
    assert verdict.unfitted == pytest.approx(0.4 / 1.4 / 3)
    assert verdict.held_out == pytest.approx(run_mean(fitted.cross_validated))
    assert verdict.held_out > verdict.unfitted  # fitted to the odd run, the folds predict the two others worse
    assert result.in_sample == result.cross_validated == result.unfitted
    assert calibration.errors is not None and calibration.errors.cross_validated == calibration.errors.unfitted
    assert result.fold_factors == [Factors()] * 3
    # the calibration file says what was not applied, with that fit's own errors
    rejected = calibration.not_applied
    assert rejected is not None and rejected.factors == fitted.factors and rejected.fitted == list(names)
    assert (rejected.held_out_error, rejected.unfitted_error) == (verdict.held_out, verdict.unfitted)
    assert rejected.errors.cross_validated != calibration.errors.cross_validated
    # a neutral calibration changes no prediction; the Fit view says why it is neutral
    path = tmp_path / "neutral.json"
    write_calibration(calibration, path)
    write_record(result, calibration, path)
    assert build_replica(scenario(8.0, str(path)), tmp_path).engine == build_replica(scenario(8.0), tmp_path).engine
    note = load_fit_view(tmp_path, "neutral.json").note
    assert "; neutral: the fit (gemm_efficiency_scale " in note and "so every prediction here is the unfitted" in note
    no_folds = fit_cases(cases, Path(), tmp_path, names, [], "test", cross_validate=False)[1]
    assert no_folds.verdict is None and no_folds.factors == fitted.factors  # no held-out runs: nothing to judge by


def run_mean(results: list[StageResult]) -> float:
    from ttftsim.accuracy.fit_select import run_errors

    return statistics.fmean(run_errors(results).values())


def test_selection_keeps_the_factor_that_predicts_left_out_runs(tmp_path: Path) -> None:
    true = Factors(gemm_efficiency_scale=0.5)
    cases = [measured_case(rate, true, tmp_path) for rate in (2.0, 8.0, 20.0)]
    names: tuple[FactorName, ...] = ("gemm_efficiency_scale", "step_overhead_s")
    calibration, result, _ = fit_cases(cases, Path(), tmp_path, names, [], "test", select_factors=True)
    tried = dict(result.selection)
    assert list(tried) == [(), ("gemm_efficiency_scale",), ("step_overhead_s",), names]  # every subset
    assert tried[()] > 0.3 and tried[("gemm_efficiency_scale",)] < 0.01 < tried[("step_overhead_s",)]
    assert "gemm_efficiency_scale" in result.names  # (with the overhead too where it trims the optimiser's rest)
    assert result.factors.gemm_efficiency_scale == pytest.approx(0.5, rel=0.03)
    assert result.factors.step_overhead_s == pytest.approx(0.0, abs=3e-4)
    assert calibration.fitted == list(result.names) and len(result.fold_factors) == 3


def test_selection_fits_nothing_where_no_factor_predicts_better(tmp_path: Path) -> None:
    cases = [measured_case(rate, Factors(), tmp_path) for rate in (2.0, 8.0, 20.0)]  # the neutral model is exact
    names: tuple[FactorName, ...] = ("gemm_efficiency_scale", "step_overhead_s")
    calibration, result, _ = fit_cases(cases, Path(), tmp_path, names, [], "test", select_factors=True)
    assert dict(result.selection)[()] == 0.0 and len(result.selection) == 4  # none, each alone, both
    assert result.names == () and result.factors == Factors() and calibration.fitted == []
    assert calibration.errors is not None and calibration.errors.cross_validated == calibration.errors.unfitted
    assert result.fold_factors == [Factors()] * 3  # each fold 'fits' the neutral factors


def test_folds_are_leave_one_out_for_few_runs_and_five_for_many() -> None:
    assert folds_of(3) == [[0], [1], [2]]
    assert folds_of(12) == [[0, 5, 10], [1, 6, 11], [2, 7], [3, 8], [4, 9]]


def test_factor_vector_round_trips() -> None:
    names: tuple[FactorName, ...] = ("gemm_efficiency_scale", "step_overhead_s")
    factors = Factors(gemm_efficiency_scale=0.25, step_overhead_s=-0.002)
    assert to_vector(names, factors).tolist() == pytest.approx([np.log(0.25), -0.4])
    assert to_factors(names, to_vector(names, factors)) == factors


def test_residuals_are_log_ratios_of_the_fitted_percentiles() -> None:
    result = StageResult(
        "run",
        "s",
        {"ttft_p50": 0.1, "ttft_mean": 0.2, "tpot_p50": 0.01},
        {"ttft_p50": 0.2, "ttft_mean": 0.1, "tpot_p50": 0.01},
        False,
        False,
    )
    assert residuals_of([result]).tolist() == pytest.approx([np.log(2.0), 0.0])  # the mean is not fitted here


# ---- refusals ----


def test_one_load_level_is_refused_for_two_factors(tmp_path: Path) -> None:
    cases = [measured_case(4.0, Factors(), tmp_path), replace(measured_case(4.0, Factors(), tmp_path), name="again")]
    with pytest.raises(InputError) as caught:
        fit_cases(cases, Path(), tmp_path, ("gemm_efficiency_scale", "step_overhead_s"), [], "test")
    assert caught.value.field == "runs" and "one load level (4 req/s)" in caught.value.message


def test_a_factor_without_effect_is_refused(tmp_path: Path) -> None:
    cases = [measured_case(rate, Factors(), tmp_path) for rate in (2.0, 10.0)]  # no attention terms in the step cost
    with pytest.raises(InputError) as caught:
        fit_cases(cases, Path(), tmp_path, ("gemm_efficiency_scale", "attention_efficiency_scale"), [], "test")
    assert caught.value.field == "attention_efficiency_scale" and "no effect" in caught.value.message
    assert "--factors gemm_efficiency_scale" in caught.value.message


class LinearResiduals:
    """A stand-in evaluator whose residuals are J x: the checks see exactly the sensitivities J."""

    def __init__(self, names: tuple[str, ...], jacobian: list[list[float]]) -> None:
        self.problem = SimpleNamespace(names=names, cases=[None, None])
        self.jacobian = np.asarray(jacobian)

    def residuals(self, x: Any, runs: Any) -> Any:
        return self.jacobian @ np.asarray(x, dtype=np.float64)


def test_factors_with_proportional_effects_are_refused() -> None:
    names = ("gemm_efficiency_scale", "step_overhead_s", "api_server_cost_scale")
    # gemm and overhead move the four metrics in the same proportions; the API server differently
    evaluator = LinearResiduals(names, [[1.0, 2.0, 0.0], [0.5, 1.0, 1.0], [0.2, 0.4, 0.0], [0.1, 0.2, 0.3]])
    with pytest.raises(InputError) as caught:
        check_effects(evaluator)  # type: ignore[arg-type]
    assert caught.value.field == "gemm_efficiency_scale, step_overhead_s" or caught.value.field == (
        "step_overhead_s, gemm_efficiency_scale"
    )
    assert "cannot tell" in caught.value.message


def test_independent_effects_pass_the_check() -> None:
    names = ("gemm_efficiency_scale", "step_overhead_s")
    check_effects(LinearResiduals(names, [[1.0, 0.0], [0.5, 1.0], [0.0, 1.0]]))  # type: ignore[arg-type]


def test_unknown_factor_is_one_line() -> None:
    with pytest.raises(InputError) as caught:
        parse_factors("gemm_efficiency_scale,warp_speed")
    assert caught.value.source == "--factors" and "'warp_speed'" in caught.value.message
    assert parse_factors("step_overhead_s, gemm_efficiency_scale") == ("gemm_efficiency_scale", "step_overhead_s")


def test_fit_with_one_report_of_one_run_is_refused_on_one_line(tmp_path: Path) -> None:
    report = REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json"
    result = run("fit", str(report), "--deployment", str(REPORTS / "cpu-server.yaml"), "-o", str(tmp_path / "c.json"))
    _assert_one_line_error(result, "ttftsim fit", "runs", "at least 2")
    assert not (tmp_path / "c.json").exists()


def test_the_same_run_twice_is_refused_before_the_fit(tmp_path: Path) -> None:
    """A report given twice, or a copy of it: a fold would hold the run it is tested on."""
    report = REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json"
    copy = tmp_path / "copy.json"
    copy.write_text(report.read_text())
    deployment = ("--deployment", str(REPORTS / "cpu-server.yaml"))
    for second in (report, copy):
        result = run("fit", str(report), str(second), *deployment, "-o", str(tmp_path / "c.json"))
        _assert_one_line_error(
            result, str(second), f"run {second.stem} is the same measurement as run poisson-2rps-detailed of {report}"
        )


def test_each_before_goes_with_a_metrics_report_in_order(tmp_path: Path) -> None:
    from ttftsim.accuracy.fit_run import _pair_snapshots

    metrics = REPORTS / "prometheus-2.42"
    after, before, bench = metrics / "metrics-after.txt", metrics / "metrics-before.txt", REPORTS / "vllm-bench-0.32.0"
    reports = [bench / "poisson-2rps-detailed.json", after, bench / "concurrency-4-summary.json", after]
    assert _pair_snapshots(reports, []) == [None] * 4
    assert _pair_snapshots(reports, [before, after]) == [None, before, None, after]
    result = run("fit", *map(str, reports), "--before", str(before), "-o", str(tmp_path / "c.json"))
    _assert_one_line_error(result, "--before", "1 snapshot(s) for 2 /metrics report(s)")


def test_problem_holds_its_runs() -> None:
    problem = Problem([], Path(), Path(), "CPU-host", ("step_overhead_s",), 0.006)
    assert Evaluator(problem).problem is problem


def test_fit_command_writes_a_calibration_that_simulations_accept(tmp_path: Path) -> None:
    reports = [
        REPORTS / "vllm-bench-0.32.0" / name for name in ("poisson-2rps-detailed.json", "concurrency-4-summary.json")
    ]
    out = tmp_path / "my-cluster.json"
    # a deployment that already names a calibration: the fit starts from the uncalibrated model, and says so
    calibration_file(tmp_path, api_server_cost_scale=3.0)
    deploy = tmp_path / "deploy.yaml"
    text = (REPORTS / "cpu-server.yaml").read_text().replace("cpu-server-model/config.json", MODEL)
    deploy.write_text(text.replace("engine:\n", "engine:\n  calibration: cal.json\n"))
    deployment = ["--deployment", str(deploy)]
    # fitted on one run, the scale predicts the other worse than none in one of the two folds: not applied
    result = run("fit", *map(str, reports), *deployment, "--factors", "api_server_cost_scale", "-o", str(out))
    assert result.returncode == 0, result.stderr
    neutral = DeploymentCalibration.model_validate_json(out.read_text())
    assert neutral.fitted == [] and neutral.factors == Factors()
    assert neutral.not_applied is not None and neutral.not_applied.factors.api_server_cost_scale > 1.5
    lines = result.stdout.splitlines()
    assert lines[0] == "factor                        fitted     range over CV folds and the fit  (not applied)"
    assert not [line for line in lines if "stopped at its bound" in line]  # no factor near a bound
    verdict = next(line for line in lines if line.startswith("held-out runs: mean abs error per run "))
    assert verdict.endswith(
        "so not applied: the calibration is neutral (--apply-anyway writes the fit; --select "
        "tries each subset of the factors)"
    )
    assert lines[-2].endswith("; neutral: it changes no prediction")
    factors = ["--factors", "api_server_cost_scale", "--apply-anyway"]
    result = run("fit", *map(str, reports), *deployment, *factors, "-o", str(out))
    assert result.returncode == 0, result.stderr
    verdict = next(line for line in result.stdout.splitlines() if line.startswith("held-out runs: "))
    assert verdict.endswith("not better by more than its standard error; written anyway (--apply-anyway)")
    note = f"note: {deploy} names engine.calibration {tmp_path / 'cal.json'}: not applied while fitting (the factors"
    assert note in result.stdout.splitlines()[-3]  # one line, unwrapped
    calibration = DeploymentCalibration.model_validate_json(out.read_text())
    assert calibration.hardware == "CPU-host" and calibration.fitted == ["api_server_cost_scale"]
    assert calibration.provenance is not None and calibration.provenance.folds == 2  # leave-one-out
    value = calibration.factors.api_server_cost_scale
    low, high = calibration.intervals["api_server_cost_scale"].low, calibration.intervals["api_server_cost_scale"].high
    assert low <= value <= high and value > 1.5  # the loaded machine's API server was slower than measured
    assert calibration.factors.gemm_efficiency_scale == 1.0  # not fitted: neutral
    line = next(line for line in result.stdout.splitlines() if line.startswith("api_server_cost_scale"))
    assert f"{value:.3f}" in line
    replica = build_replica(scenario(2.0, str(out)), tmp_path)
    assert replica.engine.api_server.per_request_s == pytest.approx(API["per_request_s"] * value)
    record = FitRecord.model_validate_json((tmp_path / "my-cluster.runs.json").read_text())  # for the Fit view
    assert f"wrote {tmp_path / 'my-cluster.runs.json'} (each run's predictions" in result.stdout
    assert record.factors == calibration.factors and record.calibration == "my-cluster.json"
    assert [(s.run, s.fold) for s in record.stages] == [("poisson-2rps-detailed", 1), ("concurrency-4-summary", 2)]
    assert [f.held_out for f in record.folds] == [["poisson-2rps-detailed"], ["concurrency-4-summary"]]
    assert record.stages[0].measured["ttft_p50"] == pytest.approx(0.0399282594999022)  # vllm bench: median_ttft_ms


def test_fit_says_when_the_profile_is_beyond_its_bounds(tmp_path: Path) -> None:
    # the runs on the shipped CPU-host profile alone (its assumed 14 ms a step, no microbenchmark): the real steps
    # take less than the profile's fixed time even with no host time left, so the overhead stops at that bound
    deploy = tmp_path / "deploy.yaml"
    text = (REPORTS / "cpu-server.yaml").read_text().replace("cpu-server-model/config.json", MODEL)
    deploy.write_text(text.split("  api_server:\n")[0])  # the engine's arguments only: no measured costs
    reports = [
        REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json",
        REPORTS / "guidellm-0.8.1" / "benchmarks.json",
    ]
    out = tmp_path / "cal.json"
    options = ["--deployment", str(deploy), "--factors", "step_overhead_s", "-o", str(out)]
    result = run("fit", *map(str, reports), *options)
    assert result.returncode == 0, result.stderr
    calibration = DeploymentCalibration.model_validate_json(out.read_text())
    assert calibration.factors.step_overhead_s == pytest.approx(-0.014, abs=5e-5)  # hwprofiles/cpu-host.yaml
    warning = next(line for line in result.stdout.splitlines() if line.startswith("warning: step_overhead_s"))
    assert warning.startswith(
        "warning: step_overhead_s stopped at its bound (-14.00 ms, no host time left in the cheapest"
    )


def test_overloaded_runs_are_left_out_with_a_note(tmp_path: Path) -> None:
    cases = [measured_case(rate, Factors(), tmp_path) for rate in (2.0, 8.0)]
    failed = replace(cases[1], name="timed out", stages=[replace(cases[1].stages[0], num_failed=3)])
    kept, notes, hardware, min_overhead = fitted_cases([*cases, failed], Path())
    assert [case.name for case in kept] == ["2 req/s", "8 req/s"] and hardware == "CPU-host"
    assert notes == ["timed out: left out (measured overloaded: requests failed or median TTFT over 10 s)"]
    assert min_overhead == STEP["fixed_s"]


def test_client_bound_runs_are_left_out_with_a_note_and_not_fitted_to(tmp_path: Path) -> None:
    cases = [measured_case(rate, Factors(), tmp_path) for rate in (2.0, 8.0)]
    late = replace(cases[1].stages[0], late_first_tokens=3, multi_token_requests=40)  # 7.5 %: client-bound
    bound = replace(cases[1], name="late reads", stages=[late])
    kept, notes, _, _ = fitted_cases([*cases, bound], Path())
    assert [case.name for case in kept] == ["2 req/s", "8 req/s"]
    assert notes == [
        "late reads: left out (client-bound: the client timed 3 of 40 first tokens with the request's last (it did "
        "not read its streams as they came, or the API server fell a whole decode behind: not the engine's TTFTs; "
        "not fitted to))"
    ]
    # a run of stages one of which is client-bound is kept, that stage not fitted to (the note says so); one whose
    # stages are each overloaded or client-bound is left out
    staged = replace(cases[1], name="staged", stages=[cases[1].stages[0], replace(late, label="stage 1")])
    overloaded = replace(cases[1].stages[0], num_failed=2)
    neither = replace(cases[1], name="neither", stages=[overloaded, late])
    kept, notes, _, _ = fitted_cases([cases[0], staged, neither], Path())
    assert [case.name for case in kept] == ["2 req/s", "staged"]
    assert notes[0].startswith("staged (stage 1): client-bound: the client timed 3 of 40") and notes[0].endswith(
        "; those stages not fitted to)"
    )
    assert notes[1] == "neither: left out (every stage measured overloaded or client-bound)"
    with pytest.raises(InputError) as caught:  # too few left: the refusal says which went, and why
        fitted_cases([cases[0], bound], Path())
    assert caught.value.field == "runs" and "needs at least 2 (late reads: left out (client-bound" in str(caught.value)
    result = StageResult("run", "s", {"ttft_p50": 0.1}, {"ttft_p50": 0.3}, False, False, {}, True)
    assert residuals_of([result]).tolist() == []  # a client-bound stage's ratios are not fitted to
    assert residuals_of([replace(result, measured_client_bound=False)]).tolist() == pytest.approx([np.log(3.0)])


def test_a_note_names_the_client_bound_stages_of_a_run() -> None:
    fine = StageTruth("2 req/s", 0.0, 30.0, {}, late_first_tokens=1, multi_token_requests=60)
    late = StageTruth("6 req/s", 30.0, 60.0, {}, late_first_tokens=9, multi_token_requests=180)
    notes = case_notes([Case("staged", scenario(2.0), [fine, late]), Case("alone", scenario(6.0), [late])])
    assert notes == [
        "staged (6 req/s): client-bound: the client timed 9 of 180 first tokens with the request's last (it did not "
        "read its streams as they came, or the API server fell a whole decode behind: not the engine's TTFTs; shown, "
        "not in the error medians)",
        "alone: client-bound: the client timed 9 of 180 first tokens with the request's last (it did not read its "
        "streams as they came, or the API server fell a whole decode behind: not the engine's TTFTs; shown, not in "
        "the error medians)",
    ]


def test_the_overheads_bound_is_the_uncalibrated_host_time(tmp_path: Path) -> None:
    """Each trial of the fit replaces a calibration the deployment names, so the overhead's lower bound is the
    host time without it (6 ms, not 6 + 4): a trial near the bound takes no host time below zero (no warning)."""
    from ttftsim.accuracy.fit_run import min_host_overhead_s

    path = calibration_file(tmp_path, step_overhead_s=0.004)
    case = Case("calibrated", scenario(2.0, str(path)), [StageTruth("2 req/s", 0.0, float("inf"), {})])
    assert min_host_overhead_s(case, tmp_path) == ("CPU-host", STEP["fixed_s"])
    # the API server on the engine core's core wraps the measured costs; the bound is still their host time
    shared = case.scenario.engine.model_copy(update={"api_server_shares_core": True})
    case = replace(case, scenario=case.scenario.model_copy(update={"engine": shared}))
    assert min_host_overhead_s(case, tmp_path) == ("CPU-host", STEP["fixed_s"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bound = Factors(step_overhead_s=-STEP["fixed_s"])
        assert scaled_linear(LinearStepModel(STEP["fixed_s"]), bound).fixed_s == 0.0
        # an H100's host times (1.2 ms with graphs) are not used with a measured step cost (6 ms, of which -3 ms
        # leaves 3): an overhead below them does not warn
        gpu = calibration_file(tmp_path, hardware="H100-SXM5-80GB", step_overhead_s=-0.003)
        replica = build_replica(scenario(2.0, str(gpu)).model_copy(update={"hardware": "H100-SXM5-80GB"}), tmp_path)
        assert isinstance(replica.cost, LinearStepModel) and replica.cost.fixed_s == pytest.approx(0.003)


def test_an_output_that_cannot_be_written_is_said_before_the_fit(tmp_path: Path) -> None:
    reports = Path(__file__).resolve().parents[1] / "data" / "reports" / "vllm-bench-0.32.0"
    files = [str(p) for p in sorted(reports.glob("*.json"))]
    deployment = str(Path(__file__).resolve().parents[2] / "examples" / "llama31-8b-h100.yaml")
    for out, needle in ((tmp_path / "none" / "x.json", "no folder"), (tmp_path, "is a folder")):
        result = run("fit", *files, "-o", str(out), "--deployment", deployment)
        _assert_one_line_error(result, str(out), "--out", needle)


def test_a_scale_stopped_at_its_bound_is_said() -> None:
    # the shipped CPU profile fitted to an AVX-512 host's runs stops at GEMM scale 20 (docs/fit.md): a fit that
    # ends at a bound has not reached the runs, and says so
    from ttftsim.accuracy.fit import SCALE_BOUNDS, FitResult

    def result(**factors: float) -> FitResult:
        names = tuple(factors)
        return FitResult(names, Factors(**factors), [], [], [], [])  # type: ignore[arg-type]

    assert result(gemm_efficiency_scale=19.96, step_overhead_s=-0.01).at_bounds() == [("gemm_efficiency_scale", 20.0)]
    assert result(attention_efficiency_scale=0.0505).at_bounds() == [("attention_efficiency_scale", 0.05)]
    assert result(gemm_efficiency_scale=18.78, api_server_cost_scale=0.06).at_bounds() == []  # 6 % and 20 % away
    assert SCALE_BOUNDS == (0.05, 20.0)
    # the overhead's bounds: no host time left per step (the deployment's smallest), and MAX_OVERHEAD_S
    floor = replace(result(step_overhead_s=-0.014), min_overhead_s=0.014)
    assert floor.at_bounds() == [("step_overhead_s", -0.014)]
    assert replace(floor, factors=Factors(step_overhead_s=-0.0138)).at_bounds() == []  # 0.2 ms above it
    assert replace(floor, factors=Factors(step_overhead_s=0.2)).at_bounds() == [("step_overhead_s", 0.2)]
    assert result(step_overhead_s=0.0).at_bounds() == []  # no floor known (not from fit()): no lower end checked
    # a fold's fit at the floor, the fit on every run not: said too (a cold trial saw -6.28 ms in the range, no word)
    folds = replace(floor, factors=Factors(step_overhead_s=-0.002))
    folds = replace(folds, fold_factors=[Factors(step_overhead_s=-0.014), Factors(step_overhead_s=0.001)])
    assert folds.at_bounds() == [] and folds.folds_at_bounds() == [("step_overhead_s", -0.014, 1)]
    assert floor.folds_at_bounds() == []


def test_a_fit_worse_than_none_on_held_out_runs_is_said() -> None:
    from ttftsim.cli.fit import worse_than_unfitted
    from ttftsim.config.deployment_calibration import MetricErrors

    errors = MetricErrors(
        in_sample={"ttft_p50": 0.05, "ttft_p90": 0.10, "ttft_p99": 0.12},
        cross_validated={"ttft_p50": 0.127, "ttft_p90": 0.15, "ttft_p99": 0.176},
        unfitted={"ttft_p50": 0.078, "ttft_p90": 0.162, "ttft_p99": 0.097},
    )
    assert worse_than_unfitted(errors) == ["ttft_p50", "ttft_p99"]  # P90 improved: not listed
    better = errors.model_copy(update={"cross_validated": {"ttft_p50": 0.05, "ttft_p90": 0.1, "ttft_p99": 0.09}})
    assert worse_than_unfitted(better) == []
    even = errors.model_copy(update={"cross_validated": dict(errors.unfitted)})  # no worse: not said
    assert worse_than_unfitted(even) == []


def test_runs_named_alike_by_their_reports_stay_apart(tmp_path: Path) -> None:
    # every tool writes reports of one name (GuideLLM: benchmarks.json): two runs must not pool as one
    reports = []
    for folder, name in (("a", "poisson-2rps-detailed.json"), ("b", "concurrency-4-summary.json")):
        (tmp_path / folder).mkdir()
        reports.append(tmp_path / folder / "x.json")
        shutil.copy(REPORTS / "vllm-bench-0.32.0" / name, reports[-1])
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text((REPORTS / "cpu-server.yaml").read_text().replace("cpu-server-model/config.json", MODEL))
    names: tuple[FactorName, ...] = ("api_server_cost_scale",)
    calibration, result, _ = fit_reports(reports, deployment, names)
    assert calibration.provenance is not None
    assert calibration.provenance.runs == [f"x ({reports[0]})", f"x ({reports[1]})"]
    assert len(result.fold_factors) == 2 and result.verdict is not None
    assert result.verdict.standard_error > 0.1  # two runs, one better and one worse: as under their own names
    assert not result.verdict.clear and calibration.not_applied is not None
    assert unique_names([(Case("a", scenario(2.0)), Path("r.json"))])[0].name == "a"  # a name alone: as it is


def test_fit_command_with_selection_prints_each_set_tried(tmp_path: Path) -> None:
    reports = [
        REPORTS / "vllm-bench-0.32.0" / name for name in ("poisson-2rps-detailed.json", "concurrency-4-summary.json")
    ]
    out = tmp_path / "selected.json"
    deployment = ["--deployment", str(REPORTS / "cpu-server.yaml")]
    factors = ["--factors", "api_server_cost_scale", "--select"]
    result = run("fit", *map(str, reports), *deployment, *factors, "-o", str(out))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("selection     mean held-out abs error per run")
    assert lines[start + 1].endswith("(none: unfitted)") and lines[start + 2].endswith("api_server_cost_scale")
    calibration = DeploymentCalibration.model_validate_json(out.read_text())
    kept = calibration.fitted == ["api_server_cost_scale"]
    assert kept == ("the calibration is neutral" not in result.stdout)
    assert kept or calibration.factors == Factors()
    refused = run("fit", *map(str, reports), *deployment, *factors, "--apply-anyway", "-o", str(out))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert (
        refused.stderr.strip()
        == "error: --apply-anyway: has no effect with --select (selection keeps what its folds show to help): give one"
    )


def test_an_improvement_must_exceed_its_standard_error() -> None:
    from ttftsim.accuracy.fit_select import clear_improvement, paired_difference

    before = {"a": 0.20, "b": 0.30, "c": 0.10}
    # differences -0.05, -0.05, -0.05: mean -0.05, no spread: clear
    assert clear_improvement(before, {"a": 0.15, "b": 0.25, "c": 0.05})
    # differences -0.15, +0.05, +0.01: mean -0.03, standard error 0.0611: not clear
    assert not clear_improvement(before, {"a": 0.05, "b": 0.35, "c": 0.11})
    assert clear_improvement({"a": 0.2}, {"a": 0.19}) and not clear_improvement({"a": 0.2}, {"a": 0.2})
    assert not clear_improvement(before, {})  # nothing in common: nothing shown
    # one run's gain alone, the others unchanged, is never clear: its mean equals its standard error
    assert paired_difference(before, {"a": 0.01, "b": 0.30, "c": 0.10}) == pytest.approx((-0.19 / 3, 0.19 / 3))
    assert not clear_improvement(before, {"a": 0.01, "b": 0.30, "c": 0.10})


def test_the_readers_notes_are_said_once_with_their_runs() -> None:
    from ttftsim.accuracy.fit_run import _reader_notes

    base = scenario(2.0)
    cases = [Case(f"r{i}", base, [], notes=("offload",) if i else ("offload", "own")) for i in range(5)]
    skipped = Case("s", base, [], skip_reason="unknown model", notes=("hidden",))
    assert _reader_notes([*cases, skipped]) == ["5 runs: offload", "r0: own"]
    assert _reader_notes(cases[:3]) == ["r0, r1, r2: offload", "r0: own"]
