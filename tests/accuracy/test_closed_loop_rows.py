"""How a closed-loop row of an AIConfigurator-style CSV becomes a scenario: the engine version the row names
(or the one of its measurement dates when it names none), and aiperf as AIConfigurator's harness of the
measurement's date called it: its eval pipeline in 2025 (unversioned rows), bench_run.sh in 2026."""

from __future__ import annotations

from pathlib import Path

from ttftsim.accuracy.ground_truth import Case, read_ground_truth
from ttftsim.config.resolved_engine import resolve_engine
from ttftsim.hardware.catalog import load_hardware
from ttftsim.workload.clients import behaviour

HEADER = (
    "system,backend,backend_version,model_path,precision,gemm_quant_mode,mode,isl,osl,concurrency,"
    "tp_size,pp_size,silicon_ttft_ms,silicon_tpot_ms\n"
)


def _cases(tmp_path: Path, *versions: str) -> list[Case]:
    path = tmp_path / "points.csv"
    rows = "".join(f"h200_sxm,vllm,{v},meta-llama/Llama-3.1-8B,bf16,bf16,agg,512,64,4,1,1,40.0,8.0\n" for v in versions)
    path.write_text(HEADER + rows)
    return read_ground_truth(path)


def test_the_rows_version_sets_async_scheduling(tmp_path: Path) -> None:
    cases = _cases(tmp_path, "0.12.0", "0.19.0", "", "nightly-5b8c30d6")
    engines = [case.scenario.engine for case in cases]
    assert [engine.vllm_version for engine in engines] == ["0.12", "0.19", "0.11", "0.11"]
    # 0.12 and the unversioned rows (measured 2025-10-29 to 2025-12-05: vLLM 0.11-0.12) keep one batch in
    # flight; 0.19 has async scheduling on by default (from 0.14)
    hardware = load_hardware("H200-SXM-141GB")
    asynchronous = [resolve_engine(engine, hardware, 8192, "bf16").async_scheduling for engine in engines]
    assert asynchronous == [False, True, False, False]


def test_a_2026_row_runs_bench_run_with_aiperfs_default_100_prompts(tmp_path: Path) -> None:
    (case,) = _cases(tmp_path, "0.12.0")
    client = case.scenario.client
    assert (client.tool, client.warmup_requests) == ("aiperf", 8)  # --warmup-request-count 2c, c = 4
    assert behaviour(client).dataset_entries == 100  # no --num-dataset-entries: the 101st request repeats a prompt
    assert behaviour(client).sampling == "shuffle"
    assert case.scenario.workload.num_requests == 8 + 80  # --num-requests 20c after the warm-up


def test_a_row_naming_any_build_runs_bench_run(tmp_path: Path) -> None:
    # 0.11.2 and a nightly map to the 0.11 engine, but a row that names a build was measured in 2026
    for case in _cases(tmp_path, "0.11.2", "nightly-5b8c30d6"):
        assert case.scenario.client.dataset_sampling is None and case.scenario.workload.num_requests == 8 + 80


def test_an_unversioned_row_runs_the_2025_eval_harness(tmp_path: Path) -> None:
    (case,) = _cases(tmp_path, "")
    client = case.scenario.client
    assert (client.tool, client.warmup_requests) == ("aiperf", 8)  # --warmup-request-count 2c, c = 4
    # --num-dataset-entries 12c, drawn with replacement by aiperf 0.1
    assert (behaviour(client).dataset_entries, behaviour(client).sampling) == (48, "random")
    assert case.scenario.workload.num_requests == 8 + 40  # --request-count 10c after the warm-up
