"""Each report reader on a real file of its tool (tests/data/reports/, written by
benchmarks/vllm_cpu/report_samples.py against the real vLLM 0.32 CPU server): the load, the requests and the
measured values, checked against numbers read from the file itself."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from tests.accuracy.test_report_errors import with_workload
from tests.test_cli import _assert_one_line_error, run
from ttftsim.accuracy.ground_truth import StageTruth
from ttftsim.accuracy.reports import measured_cases
from ttftsim.accuracy.reports.cases import UNSEEN_LATE_READS
from ttftsim.accuracy.reports.detect import read_report
from ttftsim.accuracy.reports.measured import Load, late_first_tokens, truth_from_requests

REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"
DEPLOYMENT = REPORTS / "cpu-server.yaml"
SERVE_RUNS = Path(__file__).resolve().parents[2] / "benchmarks" / "vllm_cpu" / "serve_runs"
MS = 1e-3


def test_vllm_bench_detailed_is_replayed_with_each_requests_values() -> None:
    report = read_report(REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json")
    assert report.format == "vllm-bench"
    (run_,) = report.runs
    assert run_.load == Load(rate_per_s=2.0)  # request_rate 2.0, burstiness 1.0, max_concurrency null
    assert len(run_.sent.send_s) == 30 and run_.sent.send_s[0] == 0.0
    assert run_.sent.send_s[1] == pytest.approx(13477.237969594 - 13476.72430432)  # start_times[1] - [0]
    assert run_.sent.prompt_tokens[:5] == (62, 87, 121, 121, 128) and set(run_.sent.output_tokens) == {16}
    truth = run_.truth
    assert (truth.num_succeeded, truth.num_failed, truth.label) == (30, 0, "2 req/s")
    # vllm bench's own statistics (numpy's linear percentiles, TPOT = (latency - TTFT) / (output - 1)) are the
    # same statistics of the same requests
    assert truth.measured["ttft_mean"] == pytest.approx(60.64974056668385 * MS, rel=1e-12)
    assert truth.measured["ttft_p50"] == pytest.approx(39.9282594999022 * MS, rel=1e-12)
    assert truth.measured["ttft_p90"] == pytest.approx(115.04927070018313 * MS, rel=1e-12)
    assert truth.measured["ttft_p99"] == pytest.approx(147.96474515062076 * MS, rel=1e-12)
    assert truth.measured["tpot_p50"] == pytest.approx(10.368515700065473 * MS, rel=1e-9)
    assert truth.measured["e2e_p50"] == pytest.approx(238.46581199995853 * MS, rel=1e-12)
    assert len(truth.ttft_levels_s) == 30 and min(truth.ttft_levels_s) == 0.0 and max(truth.ttft_levels_s) == 1.0


def test_vllm_bench_summary_is_a_closed_loop_from_the_statistics() -> None:
    (run_,) = read_report(REPORTS / "vllm-bench-0.32.0" / "concurrency-4-summary.json").runs
    assert run_.load == Load(concurrency=4)  # request_rate "inf", max_concurrency 4
    assert run_.sent.send_s == () and run_.sent.prompt_tokens == ()
    assert run_.mean_prompt_tokens == pytest.approx(1707 / 24) and run_.mean_output_tokens == 16.0
    truth = run_.truth
    assert (truth.num_succeeded, truth.num_failed) == (24, 0)
    assert truth.measured == pytest.approx(
        {
            "ttft_mean": 121.21029929145759 * MS,
            "ttft_p50": 67.95352500012086 * MS,
            "ttft_p99": 347.75066753925785 * MS,
            "tpot_p50": 9.218769299999016 * MS,
            "tpot_mean": 18.964425391671586 * MS,
        }
    )
    assert truth.ttft_levels_s == pytest.approx({0.5: 67.95352500012086 * MS, 0.99: 347.75066753925785 * MS})


def test_guidellm_sweep_is_one_run_per_benchmark() -> None:
    report = read_report(REPORTS / "guidellm-0.8.1" / "benchmarks.json")
    assert report.format == "guidellm"
    first, second = report.runs
    assert (first.name, second.name) == ("benchmarks #0", "benchmarks #1")
    assert (first.load, second.load) == (Load(concurrency=2), Load(concurrency=4))  # strategy.streams
    assert first.sent.prompt_tokens == (122, 85, 73, 88, 63, 96, 71, 128, 108, 106, 82, 60)
    assert first.sent.send_s == ()  # a closed loop: the clients, not the log, decide when
    assert first.truth.num_succeeded == second.truth.num_succeeded == 12
    # the 12 TTFTs of benchmark 0 sorted: ... 108.633041, 118.784666 ... ms: the median is their midpoint (GuideLLM's
    # own p50, 118.78, is a nearest-rank figure)
    assert first.truth.measured["ttft_p50"] == pytest.approx((108.633041 + 118.784666) / 2 * MS, abs=1e-9)
    assert first.truth.measured["ttft_mean"] == pytest.approx(112.65118916829428 * MS, rel=1e-12)  # metrics' mean
    assert second.truth.measured["ttft_p50"] == pytest.approx((67.192078 + 69.267988) / 2 * MS, abs=1e-9)
    assert second.truth.measured["ttft_mean"] == pytest.approx(65.4383897781372 * MS, rel=1e-12)


def test_aiperf_summary_is_a_closed_loop_with_its_warmup() -> None:
    (run_,) = read_report(REPORTS / "aiperf-0.13.0" / "profile_export_aiperf.json").runs
    assert (run_.tool, run_.load) == ("aiperf", Load(concurrency=4, warmup_requests=4))  # phases warmup + profiling
    assert (run_.mean_prompt_tokens, run_.mean_output_tokens) == (256.0, 32.0)
    truth = run_.truth
    assert truth.num_succeeded == 24
    assert truth.measured["ttft_mean"] == pytest.approx(423.8456101666667 * MS)
    assert truth.measured["ttft_p50"] == pytest.approx(330.29889099999997 * MS)
    assert truth.measured["tpot_mean"] == pytest.approx(29.26770194623656 * MS)
    assert truth.measured["e2e_p50"] == pytest.approx(1338.7014809999998 * MS)
    assert truth.ttft_levels_s[0.0] == pytest.approx(101.35942 * MS)  # min
    assert truth.ttft_levels_s[0.99] == pytest.approx(1167.41637067 * MS)


def test_aiperf_records_take_the_load_from_the_summary_beside_them() -> None:
    (run_,) = read_report(REPORTS / "aiperf-0.13.0" / "profile_export.jsonl").runs
    assert run_.load == Load(concurrency=4, warmup_requests=4)  # 4 warm-up records, 24 profiling ones
    assert run_.sent.prompt_tokens == (256,) * 24
    assert run_.truth.num_succeeded == 24
    assert run_.truth.measured["ttft_mean"] == pytest.approx(423.8456101666667 * MS)  # = the summary's avg
    assert run_.truth.measured["ttft_p50"] == pytest.approx(330.29889099999997 * MS)


def test_aiperf_records_alone_are_replayed(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text((REPORTS / "aiperf-0.13.0" / "profile_export.jsonl").read_text())
    (run_,) = read_report(records).runs
    assert run_.load is not None and run_.load.concurrency is None
    assert len(run_.sent.send_s) == 24 and run_.notes


def test_genai_perf_summary_states_its_load_as_flat_arguments(tmp_path: Path) -> None:
    data = json.loads((REPORTS / "aiperf-0.13.0" / "profile_export_aiperf.json").read_text())
    del data["aiperf_version"]
    data["input_config"] = {"model": ["m"], "concurrency": 4, "warmup_request_count": 4, "request_count": 24}
    path = tmp_path / "profile_export_genai_perf.json"
    path.write_text(json.dumps(data))
    (run_,) = read_report(path).runs
    assert (run_.tool, run_.model, run_.load) == ("genai-perf", "m", Load(concurrency=4, warmup_requests=4))
    data["input_config"] = {"request_rate": 2.5}
    path.write_text(json.dumps(data))
    assert read_report(path).runs[0].load == Load(rate_per_s=2.5)


def test_metrics_snapshot_alone_and_as_a_difference() -> None:
    after, before = (REPORTS / "prometheus-2.42" / f"metrics-{w}.txt" for w in ("after", "before"))
    (alone,) = read_report(after).runs
    (run_,) = read_report(after, before).runs
    for r in (alone, run_):  # the server was fresh: before holds zeros
        assert r.load is None and r.truth.num_succeeded == 30
        # TTFT buckets: 3 at <= 0.02 s, 16 at <= 0.04, 20, 25 at <= 0.1, 30 at <= 0.25; sum 1.6433899402618408
        assert r.truth.measured["ttft_mean"] == pytest.approx(1.6433899402618408 / 30)
        assert r.truth.measured["ttft_p50"] == pytest.approx(0.02 + 0.02 * (15 - 3) / (16 - 3))
        assert r.truth.measured["ttft_p90"] == pytest.approx(0.1 + 0.15 * (27 - 25) / (30 - 25))
        assert r.truth.ttft_levels_s[16 / 30] == 0.04


def test_metrics_difference_of_two_snapshots_of_one_server() -> None:
    """serve_bench.py's run3 snapshots: after poisson-low (GuideLLM), then after poisson-high (vllm bench, 150
    requests, per the client's own record)."""
    after = SERVE_RUNS / "poisson-high-vllmbench" / "run3-metrics.txt"
    before = SERVE_RUNS / "poisson-low-guidellm" / "run3-metrics.txt"
    (whole,) = read_report(after).runs
    (run_,) = read_report(after, before).runs
    assert whole.truth.num_succeeded == 339 and run_.truth.num_succeeded == 150
    assert len(json.loads((SERVE_RUNS / "poisson-high-vllmbench" / "run3.json").read_text())["requests"]) == 150
    assert run_.mean_output_tokens == 16.0


def test_prometheus_range_query_by_increase_over_the_window() -> None:
    report = read_report(REPORTS / "prometheus-2.42" / "query_range.json")
    assert report.format == "prometheus-range"
    (run_,) = report.runs
    truth = run_.truth
    assert truth.num_succeeded == 30  # time_to_first_token_seconds_count: 0 -> 30 over the window
    assert truth.measured["ttft_mean"] == pytest.approx(1.6433899402618408 / 30)  # _sum 0 -> 1.64339
    assert truth.measured["ttft_p50"] == pytest.approx(0.02 + 0.02 * (15 - 3) / (16 - 3))  # as the snapshot's
    assert truth.measured["running_max"] == 1.0 and truth.measured["waiting_max"] == 0.0


def test_detailed_open_loop_becomes_a_trace_of_its_sends(tmp_path: Path) -> None:
    with measured_cases(REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json", DEPLOYMENT) as (cases, base):
        (case,) = cases
        workload = case.scenario.workload
        assert base == REPORTS and workload.type == "trace" and workload.format == "csv"
        rows = list(csv.DictReader(Path(workload.path).read_text().splitlines()))
        assert len(rows) == 30 and rows[0] == {"arrival_s": "0.000000", "input_tokens": "62", "output_tokens": "16"}
        assert (case.scenario.client.tool, case.scenario.hardware, case.closed_loop) == (
            "vllm-bench",
            "CPU-host",
            False,
        )
    assert not Path(workload.path).exists()  # the folder goes with the command


def test_closed_loop_with_warmup_is_compared_by_its_means() -> None:
    with measured_cases(REPORTS / "aiperf-0.13.0" / "profile_export.jsonl", DEPLOYMENT) as (cases, _):
        (case,) = cases
        workload = case.scenario.workload
        assert workload.type == "synthetic" and workload.arrivals.type == "closed_loop"
        assert workload.num_requests == 28 and workload.prompt_tokens.type == "empirical"
        assert case.closed_loop and case.warmup_requests == 4 and case.scenario.client.warmup_requests == 4
        assert set(case.stages[0].measured) == {"ttft_mean", "tpot_mean"}


def test_summary_without_lengths_uses_the_mean_lengths(tmp_path: Path) -> None:
    with measured_cases(REPORTS / "vllm-bench-0.32.0" / "concurrency-4-summary.json", DEPLOYMENT) as (cases, _):
        workload = cases[0].scenario.workload
        assert workload.prompt_tokens.type == "fixed" and workload.prompt_tokens.value == 71  # 1707 / 24
        assert workload.num_requests == 24 and not cases[0].closed_loop
        assert cases[0].notes[-1] == UNSEEN_LATE_READS  # statistics only: late reads cannot be counted
    with measured_cases(REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json", DEPLOYMENT) as (cases, _):
        assert UNSEEN_LATE_READS not in cases[0].notes  # per-request values: counted (none late here)
        assert (cases[0].stages[0].late_first_tokens, cases[0].stages[0].multi_token_requests) == (0, 30)
    deployment = with_workload(tmp_path)
    with measured_cases(REPORTS / "prometheus-2.42" / "query_range.json", deployment) as (cases, _):
        assert UNSEEN_LATE_READS not in cases[0].notes  # a server's own metrics: no client to read late


def test_metrics_keep_the_deployments_workload(tmp_path: Path) -> None:
    deployment = with_workload(tmp_path)
    with measured_cases(REPORTS / "prometheus-2.42" / "query_range.json", deployment) as (cases, _):
        assert cases[0].scenario.workload.arrivals.rate == 2  # type: ignore[union-attr]


def test_a_servers_own_ttft_and_e2e_are_compared_with_the_simulated_server_view(tmp_path: Path) -> None:
    """vLLM's histogram times from the engine's arrival (no HTTP, tokenization or SSE): a /metrics or Prometheus
    report is compared with the simulated requests' server_ttft_s, a client's report with their ttft_s."""
    from ttftsim.accuracy.harness import run_case, simulated_requests
    from ttftsim.metrics.percentiles import percentile

    deployment = with_workload(tmp_path)
    with measured_cases(REPORTS / "prometheus-2.42" / "query_range.json", deployment) as (cases, base):
        (case,) = cases
        assert case.server_side
        (result,) = run_case(case, base)
        requests = simulated_requests(case, base)
    done = requests[requests["status"] == "finished"]
    server, client = done["server_ttft_s"].to_numpy(), done["ttft_s"].to_numpy()
    assert (client - server).min() > 1e-4  # the frontend's share is in the client's TTFT only
    assert result.predicted["ttft_p50"] == percentile(server, 0.5)
    assert result.predicted["ttft_mean"] == pytest.approx(server.mean(), rel=1e-12)
    # vLLM's end-to-end latency too: its TTFT plus the engine's first token to its last, not the client's
    server_e2e, client_e2e = done["server_e2e_s"].to_numpy(), done["e2e_s"].to_numpy()
    assert np.allclose(server_e2e, server + done["finish_s"].to_numpy() - done["first_token_s"].to_numpy(), rtol=1e-12)
    assert (client_e2e - server_e2e).min() > 1e-4
    assert result.predicted["e2e_p50"] == float(np.median(server_e2e))
    with measured_cases(REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json", DEPLOYMENT) as (cases, _):
        assert not cases[0].server_side


def test_accuracy_command_on_a_report() -> None:
    report = REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json"
    result = run("accuracy", str(report), "--deployment", str(DEPLOYMENT), "--json")
    assert result.returncode == 0, result.stderr
    (stage,) = json.loads(result.stdout)["stages"]
    assert stage["case"] == "poisson-2rps-detailed" and stage["stage"] == "2 req/s"
    assert stage["measured"]["ttft_p50"] == pytest.approx(39.9282594999022 * MS, rel=1e-12)
    assert set(stage["predicted"]) >= {"ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50"}


def test_first_tokens_timed_with_the_last_are_late_reads() -> None:
    ttft, e2e = [0.1, 0.2, 0.3, 0.05, 0.4], [0.1009, 0.2, 0.5, 0.05, 0.4011]
    # 0.9 ms and 0 after the first token: read with the last; 200 ms, 1.1 ms: streamed; one token: no decode step
    assert late_first_tokens(ttft, e2e, [10, 2, 10, 1, 3]) == (2, 4)


def _late_reads(tmp_path: Path, late: int) -> Path:
    """The real vllm bench report with `late` of its requests' first tokens moved to their last."""
    data = json.loads((REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json").read_text())
    for i in range(late):
        data["ttfts"][i] = data["latencies"][i]
    path = tmp_path / f"late-{late}.json"
    path.write_text(json.dumps(data))
    return path


def test_a_client_that_timed_one_first_token_in_twenty_with_the_last_is_client_bound(tmp_path: Path) -> None:
    (run_,) = read_report(_late_reads(tmp_path, 1)).runs
    assert (run_.truth.late_first_tokens, run_.truth.multi_token_requests) == (1, 30)
    assert not run_.truth.is_client_bound  # 3.3 %
    (run_,) = read_report(_late_reads(tmp_path, 2)).runs
    assert run_.truth.late_first_tokens == 2 and run_.truth.is_client_bound  # 6.7 %
    result = run("accuracy", str(tmp_path / "late-2.json"), "--deployment", str(DEPLOYMENT), "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    (stage,) = payload["stages"]
    assert stage["measured_client_bound"] is True and stage["predicted"]["ttft_p50"] > 0  # shown, with its errors
    assert payload["summary"]["client_bound_stages"] == 1 and payload["summary"]["metrics"] == {}
    assert payload["notes"] == [
        "late-2: client-bound: the client timed 2 of 30 first tokens with the request's last (it did not read its "
        "streams as they came, or the API server fell a whole decode behind: not the engine's TTFTs; shown, not in "
        "the error medians)"
    ]
    text = run("accuracy", str(tmp_path / "late-2.json"), "--deployment", str(DEPLOYMENT)).stdout
    assert "2 req/s (client-bound)" in text and "no scored stages: every stage was measured overloaded" in text
    assert "client-bound stages (shown; not in the medians, the interval or the SLO counts; the notes say" in text


def test_one_late_read_in_twenty_is_client_bound_and_fewer_is_not() -> None:
    def truth(late: int, requests: int = 60) -> StageTruth:
        ttft = [0.05] * requests
        e2e = [t + (0.0 if i < late else 0.2) for i, t in enumerate(ttft)]
        return truth_from_requests("s", ttft, e2e, [16] * requests, 0)

    assert truth(3).is_client_bound and not truth(2).is_client_bound  # 3 of 60 is 5 %
    assert not truth(0).is_client_bound


def test_aiperf_records_count_their_late_reads(tmp_path: Path) -> None:
    """The aiperf reader passes its records' TTFT and latency through the same rule (two of its 24 profiling
    records' first tokens moved to their last: 8 %)."""
    lines = (REPORTS / "aiperf-0.13.0" / "profile_export.jsonl").read_text().splitlines()
    moved = 0
    for i, line in enumerate(lines):
        record = json.loads(line)
        if moved < 2 and record["metadata"]["benchmark_phase"] == "profiling":
            record["metrics"]["time_to_first_token"]["value"] = record["metrics"]["request_latency"]["value"]
            lines[i], moved = json.dumps(record), moved + 1
    folder = tmp_path / "aiperf"
    folder.mkdir()
    (folder / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    summary = REPORTS / "aiperf-0.13.0" / "profile_export_aiperf.json"
    (folder / summary.name).write_text(summary.read_text())
    (run_,) = read_report(folder / "profile_export.jsonl").runs
    assert (run_.truth.late_first_tokens, run_.truth.multi_token_requests) == (2, 24) and run_.truth.is_client_bound


def test_the_device_core_server_is_a_deployment_with_its_own_costs() -> None:
    """The server of runs run8/run9 (tests/data/reports/cpu-server-device-core.yaml): the same report reads
    against it, with its own costs (measured with the worker alone on a core) and its front end's latency."""
    report = REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json"
    shared, device_core = (
        json.loads(run("accuracy", str(report), "--deployment", str(path), "--json").stdout)["stages"][0]
        for path in (DEPLOYMENT, REPORTS / "cpu-server-device-core.yaml")
    )
    assert shared["measured"] == device_core["measured"]
    assert device_core["predicted"]["ttft_p50"] > 0.006  # the front end's measured 6.0 ms is in it
    assert device_core["predicted"] != shared["predicted"]


IPERF = REPORTS / "inference-perf-0.7.0" / "shared-prefix-constant"


def test_inference_perf_folder_is_one_run_of_its_stages_back_to_back() -> None:
    report = read_report(IPERF)
    assert report.format == "inference-perf"
    (run_,) = report.runs
    assert run_.tool == "inference-perf" and run_.load == Load(rate_per_s=2.0, process="constant")
    # config.yaml: shared_prefix 4 groups x 5 prompts, 192 + 64 tokens, 24 out; constant stages 2/s x 10 s, 5/s x 10 s
    assert run_.shared_prefix == {
        "num_groups": 4,
        "num_prompts_per_group": 5,
        "system_prompt_len": 192,
        "question_len": 64,
        "output_len": 24,
    }
    assert run_.arrivals == {
        "type": "stages",
        "process": "inference-perf-constant",  # the tool's timer: scaled exponential gaps, not every 1/rate
        "stages": [{"rate": 2.0, "duration_s": 10.0}, {"rate": 5.0, "duration_s": 10.0}],
    }
    first, second = run_.stages
    assert (first.start_s, first.end_s, second.start_s, second.end_s) == (0.0, 10.0, 10.0, 20.0)
    assert (first.num_succeeded, second.num_succeeded) == (20, 50)  # load_summary.count of each stage file
    # the requests' own values, in start order: stage 0's median and mean are the stage file's
    assert first.measured["ttft_p50"] == pytest.approx(0.019982744503067806, rel=1e-12)
    assert first.measured["ttft_mean"] == pytest.approx(0.025965510850801364, rel=1e-12)
    assert second.measured["ttft_p50"] == pytest.approx(0.0167468360014027, rel=1e-12)
    assert len(run_.sent.send_s) == 70 and run_.sent.send_s[1] == pytest.approx(34675.49266408 - 34675.415135172)
    assert set(run_.sent.prompt_tokens) == {256} and set(run_.sent.output_tokens) == {24}


def test_inference_perf_is_read_from_any_of_its_reports() -> None:
    for name in ("stage_1_lifecycle_metrics.json", "per_request_lifecycle_metrics.json"):
        assert read_report(IPERF / name).runs == read_report(IPERF).runs


def test_inference_perf_without_per_request_report_uses_each_stages_percentiles(tmp_path: Path) -> None:
    folder = tmp_path / "reports-20261203"
    folder.mkdir()
    for path in IPERF.glob("*lifecycle_metrics.json"):
        if not path.name.startswith("per_request"):
            (folder / path.name).write_text(path.read_text())
    (folder / "config.yaml").write_text((IPERF / "config.yaml").read_text())
    (run_,) = read_report(folder).runs
    stage = run_.stages[1]
    reported = json.loads((IPERF / "stage_1_lifecycle_metrics.json").read_text())["successes"]["latency"]
    ttft, e2e = reported["time_to_first_token"], reported["request_latency"]
    assert stage.measured["ttft_p50"] == ttft["median"] and stage.measured["ttft_p99"] == ttft["p99"]
    assert stage.measured["tpot_p50"] == pytest.approx((e2e["median"] - ttft["median"]) / 23)  # output_len 24
    assert stage.ttft_levels_s[0.999] == ttft["p99.9"] and stage.ttft_levels_s[0.0] == ttft["min"]
    assert run_.sent.send_s == () and "no per-request report: each stage's reported percentiles" in run_.notes


def test_inference_perf_default_per_request_fields_fall_back_to_the_stage_reports(tmp_path: Path) -> None:
    """inference-perf's default per_request_fields keep no computed_metrics: no TTFT per request, so the stage
    reports' percentiles are used (not every request counted as failed)."""
    folder = tmp_path / "iperf"
    folder.mkdir()
    for path in IPERF.iterdir():
        (folder / path.name).write_text(path.read_text())
    requests = json.loads((IPERF / "per_request_lifecycle_metrics.json").read_text())
    for request in requests:
        request.pop("computed_metrics")
        request["info"] = {"input_tokens": 256}
    (folder / "per_request_lifecycle_metrics.json").write_text(json.dumps(requests))
    (run_,) = read_report(folder).runs
    assert [stage.num_failed for stage in run_.stages] == [0, 0]
    reported = json.loads((IPERF / "stage_0_lifecycle_metrics.json").read_text())["successes"]["latency"]
    assert run_.stages[0].measured["ttft_p99"] == reported["time_to_first_token"]["p99"]
    assert any("no computed_metrics" in note for note in run_.notes)


def test_inference_perf_case_is_the_shared_prefix_workload_in_stages() -> None:
    with measured_cases(IPERF, DEPLOYMENT) as (cases, _):
        (case,) = cases
    workload = case.scenario.workload
    assert workload.type == "shared_prefix" and workload.num_groups == 4  # type: ignore[union-attr]
    assert [s.label for s in case.stages] == ["stage 0: 2 req/s", "stage 1: 5 req/s"]
    assert case.scenario.client.tool == "inference-perf"
    result = run("accuracy", str(IPERF), "--deployment", str(DEPLOYMENT), "--json")
    assert result.returncode == 0, result.stderr
    stages = json.loads(result.stdout)["stages"]
    assert [s["stage"] for s in stages] == ["stage 0: 2 req/s", "stage 1: 5 req/s"]
    assert stages[0]["measured"]["ttft_p50"] == pytest.approx(0.019982744503067806, rel=1e-12)


def test_inference_perf_stages_pool_against_the_servers_histogram() -> None:
    """The server's histogram holds every request of the run: the client side is all stages' requests."""
    requests = json.loads((IPERF / "per_request_lifecycle_metrics.json").read_text())
    ttft = [r["computed_metrics"]["time_to_first_token"] for r in requests]
    server = [
        "--server-metrics",
        str(IPERF / "metrics-after.txt"),
        "--server-before",
        str(IPERF / "metrics-before.txt"),
    ]
    result = run("accuracy", str(IPERF), "--deployment", str(DEPLOYMENT), *server, "--json")
    assert result.returncode == 0, result.stderr
    (view,) = json.loads(result.stdout)["server_view"]
    assert view["num_server_requests"] == 70 == len(ttft)
    assert view["client"]["ttft_mean"] == pytest.approx(sum(ttft) / len(ttft), rel=1e-12)
    assert view["server"]["ttft_mean"] < view["client"]["ttft_mean"]  # the way in and out is the client's share


def test_inference_perf_stages_without_their_requests_cannot_pool_against_the_server(tmp_path: Path) -> None:
    """Stage percentiles alone cannot be pooled into one run's values: refused in one line, whatever the count."""
    folder = tmp_path / "iperf"
    folder.mkdir()
    for path in IPERF.iterdir():
        if path.name != "per_request_lifecycle_metrics.json":
            (folder / path.name).write_text(path.read_text())
    server = [
        "--server-metrics",
        str(IPERF / "metrics-after.txt"),
        "--server-before",
        str(IPERF / "metrics-before.txt"),
    ]
    result = run("accuracy", str(folder), "--deployment", str(DEPLOYMENT), *server)
    _assert_one_line_error(result, "--server-metrics", "need each request's TTFT")


def test_a_kernel_cost_choice_that_a_measured_step_cost_overrides_is_said() -> None:
    """And it changes nothing indeed: `calibrated` on hardware without a kernel fit (the CPU server's) is not
    refused where measured step costs replace the kernel costs."""
    from ttftsim.accuracy.ground_truth import case_notes, with_kernel_costs
    from ttftsim.accuracy.harness import run_case

    with measured_cases(REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json", DEPLOYMENT) as (cases, base):
        assert case_notes(cases) == []
        assert case_notes(cases, "roofline") == [
            "--kernel-costs roofline changes nothing on poisson-2rps-detailed: the deployment gives "
            "measured_step_cost, which replaces the kernel costs"
        ]
        (auto,) = run_case(cases[0], base, max_seeds=1)
        (calibrated,) = run_case(with_kernel_costs(cases, "calibrated")[0], base, max_seeds=1)
        assert calibrated.predicted == auto.predicted
