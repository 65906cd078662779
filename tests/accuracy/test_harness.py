"""`ttftsim accuracy` on the ground-truth formats, and the fidelity it must keep."""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim.accuracy.ground_truth import StageTruth, read_ground_truth
from ttftsim.accuracy.harness import (
    MetricInterval,
    StageResult,
    closed_loop_intervals,
    open_loop_intervals,
    run_all,
    run_case,
    summarize,
)
from ttftsim.metrics.intervals import Interval

RUN = {
    "run": "tiny-7b",
    "engine": {
        "name": "vllm",
        "version": "0.15.1",
        "hardware": "H100-SXM5-80GB",
        "model": "meta-llama/Llama-2-7b-hf",
        "tensor_parallelism": 1,
        "max_model_len": 4096,
        "max_num_batched_tokens": 2048,
        "max_num_seqs": 128,
        "app": "inference-perf",
    },
    "workload": {
        "type": "shared_prefix",
        "shared_prefix": {
            "num_groups": 2,
            "num_prompts_per_group": 5,
            "system_prompt_len": 100,
            "question_len": 200,
            "output_len": 20,
        },
        "arrivals": {"type": "constant", "stages": [{"duration": 20, "rate": 2}, {"duration": 20, "rate": 4}]},
    },
    "stages": [
        {
            "rate_rps": r,
            "duration_s": 20,
            "n_success": 20 * r,
            "n_fail": 0,
            "latency_s": {
                "time_to_first_token": {"mean": 0.03, "median": 0.03, "p90": 0.035, "p99": 0.04},
                "request_latency": {"median": 0.2},
            },
        }
        for r in (2, 4)
    ],
}


def test_open_loop_file_of_the_published_format(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([RUN]))
    cases = read_ground_truth(path)
    assert [s.label for s in cases[0].stages] == ["2 req/s", "4 req/s"]
    assert cases[0].scenario.client.tool == "inference-perf"
    assert cases[0].scenario.first_visible_token == 1  # TTFT = the first SSE message, sent with the first token
    results = run_case(cases[0])
    assert len(results) == 2 and not any(r.predicted_overloaded for r in results)
    assert 0.005 < results[0].predicted["ttft_p50"] < 0.1
    summary = summarize(results)
    assert summary["metrics"]["ttft_p50"]["stages"] == 2


def test_closed_loop_csv(tmp_path: Path) -> None:
    path = tmp_path / "points.csv"
    path.write_text(
        "system,backend,backend_version,model_path,precision,gemm_quant_mode,mode,isl,osl,concurrency,"
        "tp_size,pp_size,silicon_ttft_ms,silicon_tpot_ms\n"
        "h100_sxm,vllm,,meta-llama/Llama-3.1-8B,bf16,bf16,agg,512,64,4,1,1,40.0,8.0\n"
    )
    results = run_case(read_ground_truth(path)[0])
    assert results[0].predicted["tpot_mean"] == pytest.approx(0.008, rel=0.5)


def test_cli_json_and_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([RUN]))
    result = run("accuracy", str(path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"stages", "summary", "skipped", "notes"}
    assert any("CPU KV-offload" in note for note in data["notes"])  # said, not silently ignored
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"run": "x", "engine": {}}]))
    _assert_one_line_error(run("accuracy", str(broken)), str(broken))
    _assert_one_line_error(run("accuracy", str(tmp_path / "none.json")), "file not found")


@pytest.mark.shared
def test_fidelity_on_h100_vllm_runs(shared: Path) -> None:
    """Issue #15's bars: median APE <= 5% for TTFT P50 and P90, <= 12% for P99, over stages that did not
    overload; every overloaded stage predicted overloaded. The runs' `constant` stages are sent as the tool's
    timer sends them (scaled exponential gaps); evenly spaced sends gave P99 13%."""
    cases = read_ground_truth(shared / "validation/h100_vllm_runs.json")
    assert {case.scenario.workload.arrivals.process for case in cases} == {"inference-perf-constant"}  # type: ignore[union-attr]
    results = [s for case in cases for s in run_case(case)]
    summary = summarize(results)
    metrics = summary["metrics"]
    assert metrics["ttft_p50"]["median_ape"] <= 0.05
    assert metrics["ttft_p90"]["median_ape"] <= 0.05
    assert metrics["ttft_p99"]["median_ape"] <= 0.12
    assert summary["overloaded_predicted_overloaded"] == summary["overloaded_stages"] > 0
    assert summary["false_overload"] == 0


def test_unknown_model_and_newer_version_are_handled_per_case(tmp_path: Path) -> None:
    unknown = json.loads(json.dumps(RUN))
    unknown["run"], unknown["engine"]["model"] = "unknown-model", "acme/Frontier-9000"
    newer = json.loads(json.dumps(RUN))
    newer["run"], newer["engine"]["version"] = "newer-version", "0.19.2"  # uses the nearest modelled profile
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([unknown, newer]))
    result = run("accuracy", str(path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [s["case"] for s in data["skipped"]] == ["unknown-model"]
    assert "Frontier-9000" in data["skipped"][0]["reason"]
    assert {s["case"] for s in data["stages"]} == {"newer-version"}


CSV_HEADER = (
    "system,backend,backend_version,model_path,precision,gemm_quant_mode,mode,isl,osl,concurrency,"
    "tp_size,pp_size,silicon_ttft_ms,silicon_tpot_ms\n"
)


def _window(ttft_s: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"status": "finished", "ttft_s": ttft_s, "tpot_s": 0.01})


def _stage(levels: dict[float, float], num_succeeded: int = 100, mean_s: float = 0.05) -> StageTruth:
    return StageTruth("s", 0.0, 1.0, {"ttft_mean": mean_s}, 0, levels, num_succeeded)


def test_stage_intervals_that_overlap_and_that_do_not() -> None:
    window = _window([i / 1000 for i in range(1, 101)])  # predicted P50 of 100: X(40)..X(61) = 40..61 ms
    near = open_loop_intervals(window, _stage({0.0: 0.01, 0.25: 0.03, 0.5: 0.05, 0.75: 0.07, 1.0: 0.2}))
    p50 = near["ttft_p50"]
    assert (p50.predicted.lo, p50.predicted.hi) == (0.040, 0.061)
    # measured ranks 40..61 of 100 sit at levels 0.394..0.606: the reported p25 and p75 bracket them
    assert (p50.measured.lo, p50.measured.hi) == (0.03, 0.07)
    assert p50.overlap is True
    far = open_loop_intervals(window, _stage({0.0: 0.1, 0.25: 0.12, 0.5: 0.15, 0.75: 0.18, 1.0: 0.3}, mean_s=0.15))
    assert (far["ttft_p50"].measured.lo, far["ttft_p50"].measured.hi) == (0.12, 0.18)
    assert far["ttft_p50"].overlap is False
    # the mean: measured is a point (no per-request values), predicted is mean +/- 1.96 standard errors:
    # 50.5 ms +/- 1.96 x 29.01 / sqrt(100) = 44.8..56.2 ms, which holds 50 ms and not 150 ms
    mean = near["ttft_mean"]
    assert (mean.measured.lo, mean.measured.hi, mean.measured.coverage) == (0.05, 0.05, None)
    half = 1.959964 * float(np.std(window["ttft_s"], ddof=1)) / 10
    assert [mean.predicted.lo, mean.predicted.hi] == pytest.approx([0.0505 - half, 0.0505 + half], abs=1e-7)
    assert mean.overlap is True and far["ttft_mean"].overlap is False


def test_median_tpot_has_the_simulated_requests_order_statistic_interval() -> None:
    window = _window([0.05] * 100).assign(tpot_s=[i / 1000 for i in range(1, 101)])
    stage = StageTruth("s", 0.0, 1.0, {"tpot_p50": 0.05}, 0, {0.5: 0.05}, 100)
    tpot = open_loop_intervals(window, stage)["tpot_p50"]
    assert (tpot.predicted.lo, tpot.predicted.hi) == (0.040, 0.061)  # X(40)..X(61) of 1..100 ms, as TTFT's
    assert (tpot.measured.lo, tpot.measured.hi, tpot.overlap) == (None, None, None)
    assert "tpot_p50" not in open_loop_intervals(window, _stage({0.5: 0.05}))  # not measured: no interval


def test_no_predicted_requests_or_no_reported_percentiles_is_unknown_not_agreement() -> None:
    nothing = open_loop_intervals(_window([]), _stage({0.0: 0.01, 0.5: 0.05, 1.0: 0.2}))
    assert nothing["ttft_p50"].overlap is None
    unreported = open_loop_intervals(_window([0.01, 0.02, 0.03]), _stage({}, num_succeeded=0))
    assert unreported["ttft_p99"].measured.lo is None and unreported["ttft_p99"].overlap is None


def test_closed_loop_means_have_a_predicted_interval_only() -> None:
    stage = StageTruth("c=4", 0.0, float("inf"), {"ttft_mean": 0.1, "tpot_mean": 0.0101})
    intervals = closed_loop_intervals(_window([0.09, 0.1, 0.11, 0.1]), stage)
    assert set(intervals) == {"ttft_mean", "tpot_mean"}
    assert intervals["ttft_mean"].measured.basis == "reported mean: no interval"
    assert intervals["ttft_mean"].overlap is True  # 100 ms inside 100 +/- 8 ms
    assert intervals["tpot_mean"].overlap is False  # every simulated TPOT is 10 ms: a zero-width interval


def _result(overlaps: dict[str, bool | None], overloaded: bool = False) -> StageResult:
    measured = {"ttft_p50": 0.03, "ttft_p99": 0.05}
    unit = Interval(0.0, 1.0, 0.95, "")
    intervals = {k: MetricInterval(unit, unit, v) for k, v in overlaps.items()}
    return StageResult("case", "s", measured, measured, overloaded, overloaded, intervals)


def test_client_bound_stages_are_counted_and_left_out_of_the_medians_and_the_slo_sides() -> None:
    right = StageResult("a", "s", {"ttft_p50": 0.1, "ttft_p99": 0.2}, {"ttft_p50": 0.11, "ttft_p99": 0.2}, False, False)
    bound = StageResult("b", "s", {"ttft_p50": 0.3, "ttft_p99": 2.0}, {"ttft_p50": 0.1, "ttft_p99": 0.2}, False, False)
    bound = replace(bound, measured_client_bound=True)
    summary = summarize([right, bound])
    assert summary["metrics"]["ttft_p50"]["stages"] == 1
    assert summary["metrics"]["ttft_p50"]["median_ape"] == pytest.approx(0.1)  # the client-bound 67 % is not in it
    assert summary["client_bound_stages"] == 1 and summary["overloaded_stages"] == 0
    assert summary["p99_slo_agreement"]["1s"] == {"agree": 1, "stages": 1}  # its measured 2 s P99 is the client's
    unbound = summarize([right, replace(bound, measured_client_bound=False)])
    assert unbound["metrics"]["ttft_p50"]["stages"] == 2 and unbound["client_bound_stages"] == 0


def test_summary_counts_overlapping_stages_per_percentile() -> None:
    results = [
        _result({"ttft_p50": True, "ttft_p99": True}),
        _result({"ttft_p50": False, "ttft_p99": True}),
        _result({"ttft_p50": None, "ttft_p99": False}),  # no interval on one side: not counted
        _result({"ttft_p50": False, "ttft_p99": False}, overloaded=True),  # overloaded stages are left out
    ]
    assert summarize(results)["interval_overlap"] == {
        "confidence": 0.95,
        "metrics": {"ttft_p50": {"overlap": 1, "stages": 2}, "ttft_p99": {"overlap": 2, "stages": 3}},
    }


def test_open_loop_case_carries_the_reported_percentiles_and_request_count(tmp_path: Path) -> None:
    run_ = json.loads(json.dumps(RUN))
    run_["stages"][0]["latency_s"]["time_to_first_token"] |= {"min": 0.02, "p25": 0.028, "max": 0.09}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([run_]))
    stage = read_ground_truth(path)[0].stages[0]
    assert stage.num_succeeded == 40
    assert stage.ttft_levels_s == {0.0: 0.02, 0.25: 0.028, 0.5: 0.03, 0.9: 0.035, 0.99: 0.04, 1.0: 0.09}
    results = run_case(read_ground_truth(path)[0])
    assert {"ttft_p50", "ttft_p90", "ttft_p99", "ttft_mean"} <= set(results[0].intervals)
    assert results[0].intervals["ttft_p50"].measured.basis.startswith("reported p25..p90 around ranks")


def test_aiconfigurator_names_are_read_and_unknown_ones_skipped_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "silicon.csv"
    path.write_text(
        CSV_HEADER
        + "h100_sxm,vllm,,nvidia/Llama-3.1-8B-Instruct-FP8,fp8,fp8,agg,512,64,4,1,1,40.0,8.0\n"
        + "tpu_v6e,vllm,,meta-llama/Llama-3.1-8B,bf16,bf16,agg,512,64,4,1,1,20.0,4.0\n"
        + "h100_sxm,vllm,,nvidia/Llama-3.1-8B-Instruct-FP4,fp4,fp4,agg,512,64,4,1,1,20.0,4.0\n"
    )
    cases = read_ground_truth(path)
    scenario = cases[0].scenario
    assert (scenario.model, scenario.hardware, scenario.engine.quantization) == (
        "Llama-3.1-8B",
        "H100-SXM5-80GB",
        "fp8",
    )
    assert cases[0].skip_reason is None
    results, skipped = run_all(cases)
    assert [r.case for r in results] == [cases[0].name]
    assert [name for name, _ in skipped] == [cases[1].name, cases[2].name]
    assert "no hardware profile for system 'tpu_v6e'" in skipped[0][1]
    assert "quantization suffix 'FP4'" in skipped[1][1]


def test_cases_simulated_in_parallel_processes_give_the_serial_results_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ttftsim.accuracy.harness as harness

    submitted: list[str] = []

    class Spy(ProcessPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            submitted.append(args[0].name)
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(harness, "local_pool", lambda workers: Spy(max_workers=workers))
    monkeypatch.setattr(harness, "usable_workers", lambda asked, tasks: min(asked, tasks))  # any machine's CPUs
    path = tmp_path / "runs.json"
    second = {**RUN, "run": "tiny-7b-tp2", "engine": {**RUN["engine"], "tensor_parallelism": 2}}
    unknown = {**RUN, "run": "unknown-model", "engine": {**RUN["engine"], "model": "example/NoSuchModel-7B"}}
    path.write_text(json.dumps([RUN, unknown, second]))
    cases = read_ground_truth(path)
    serial = run_all(cases)
    assert [r.case for r in serial[0]] == ["tiny-7b"] * 2 + ["tiny-7b-tp2"] * 2
    assert [name for name, _ in serial[1]] == ["unknown-model"]
    assert submitted == []  # one worker: in this process
    assert run_all(cases, workers=2) == serial
    assert submitted == ["tiny-7b", "unknown-model", "tiny-7b-tp2"]  # every case went to the pool, in order


def test_an_interval_below_95_percent_shows_its_coverage() -> None:
    """A P99 of 30 requests cannot have 95% coverage (at most 1 - 0.99^30 = 26%): the table says so."""
    from ttftsim.metrics.intervals import Interval, sample_quantile_interval
    from ttftsim.render.accuracy import _interval

    p99 = sample_quantile_interval(np.arange(30.0) / 1e3, 0.99)
    # X(28)..X(30): 28 or 29 of the 30 requests below the true P99, B ~ Binomial(30, 0.99)
    assert p99.coverage == pytest.approx(435 * 0.99**28 * 0.01**2 + 30 * 0.99**29 * 0.01, abs=1e-12)
    assert _interval(p99) == "27.0-29.0 (26%)"
    assert "%" not in _interval(sample_quantile_interval(np.arange(3000.0) / 1e3, 0.5))  # 95% reached
    assert _interval(Interval(0.0606, 0.0606, None, "reported mean")) == "60.6 (point)"


def test_accuracy_json_writes_undefined_figures_as_null() -> None:
    """`accuracy --json` wrote NaN for a figure a run does not define (a cold trial's TPOT of one-token prompts):
    JSON parsers other than Python's refuse it. Non-finite numbers become null, at any depth."""
    import math

    from ttftsim.cli.measure import _finite

    payload = {"stages": [{"predicted": {"tpot_p50": math.nan, "ttft_p99": math.inf, "ttft_p50": 0.02}}], "n": 3}
    assert _finite(payload) == {
        "stages": [{"predicted": {"tpot_p50": None, "ttft_p99": None, "ttft_p50": 0.02}}],
        "n": 3,
    }
    assert json.loads(json.dumps(_finite(payload), allow_nan=False))["stages"][0]["predicted"]["tpot_p50"] is None
