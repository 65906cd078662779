"""`ttftsim accuracy` on the ground-truth formats, and the fidelity it must keep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim.accuracy.ground_truth import read_ground_truth
from ttftsim.accuracy.harness import run_case, summarize

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
    assert cases[0].scenario.first_visible_token == 2  # the inference-perf profile
    results = run_case(cases[0])
    assert len(results) == 2 and not any(r.predicted_overloaded for r in results)
    assert 0.01 < results[0].predicted["ttft_p50"] < 0.1
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
    assert set(json.loads(result.stdout)) == {"stages", "summary", "skipped"}
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps([{"run": "x", "engine": {}}]))
    _assert_one_line_error(run("accuracy", str(broken)), str(broken))
    _assert_one_line_error(run("accuracy", str(tmp_path / "none.json")), "file not found")


@pytest.mark.shared
def test_fidelity_on_h100_vllm_runs(shared: Path) -> None:
    """The published bars: median APE <= 10% for TTFT P50 and P90, <= 15% for P99, over stages that did
    not overload; every overloaded stage predicted overloaded."""
    results = [s for case in read_ground_truth(shared / "validation/h100_vllm_runs.json") for s in run_case(case)]
    summary = summarize(results)
    metrics = summary["metrics"]
    assert metrics["ttft_p50"]["median_ape"] <= 0.10
    assert metrics["ttft_p90"]["median_ape"] <= 0.10
    assert metrics["ttft_p99"]["median_ape"] <= 0.15
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
