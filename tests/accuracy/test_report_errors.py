"""Malformed, truncated and edited reports: one InputError naming the file and the field (through the CLI: one
line on stderr, exit 2), never another exception."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_cli import _assert_one_line_error, run
from ttftsim.accuracy.reports import measured_cases
from ttftsim.accuracy.reports.detect import read_report
from ttftsim.errors import InputError

REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"
DEPLOYMENT = REPORTS / "cpu-server.yaml"
VLLM = REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json"
VLLM_SUMMARY = REPORTS / "vllm-bench-0.32.0" / "concurrency-4-summary.json"
GUIDELLM = REPORTS / "guidellm-0.8.1" / "benchmarks.json"
AIPERF = REPORTS / "aiperf-0.13.0" / "profile_export_aiperf.json"
RECORDS = REPORTS / "aiperf-0.13.0" / "profile_export.jsonl"
METRICS = REPORTS / "prometheus-2.42" / "metrics-after.txt"
RANGE = REPORTS / "prometheus-2.42" / "query_range.json"


def edited(tmp_path: Path, source: Path, edit: Callable[[Any], None], name: str | None = None) -> Path:
    data = json.loads(source.read_text())
    edit(data)
    path = tmp_path / (name or source.name)
    path.write_text(json.dumps(data))
    return path


def with_workload(folder: Path) -> Path:
    """The CPU server's deployment with the Poisson workload of the run the Prometheus files bracket."""
    path = folder / "deploy.yaml"
    model = REPORTS / "cpu-server-model" / "config.json"
    workload = "workload: {type: synthetic, arrivals: {type: poisson, rate: 2}, num_requests: 30,\n"
    workload += "  prompt_tokens: {type: uniform, low: 32, high: 128}, output_tokens: {type: fixed, value: 16}}\n"
    path.write_text(DEPLOYMENT.read_text().replace("cpu-server-model/config.json", str(model)) + workload)
    return path


def error_of(path: Path, before: Path | None = None) -> InputError:
    with pytest.raises(InputError) as caught:
        read_report(path, before)
    return caught.value


def test_truncated_json_says_where(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text(VLLM.read_text()[:5000])
    error = error_of(cut)
    assert error.source == str(cut) and "not valid JSON" in error.message


@pytest.mark.parametrize(
    ("source", "edit", "field", "message"),
    [
        (VLLM, lambda d: d.update(ttfts="fast"), "ttfts", "expected a list"),
        (VLLM, lambda d: d.pop("request_rate"), "request_rate", "missing"),
        (VLLM, lambda d: d["ttfts"].pop(), "ttfts", "expected 30 items"),  # num_prompts names the length
        # impossible values: a negative latency, a first token after the end, no output, falling percentiles
        (VLLM, lambda d: d["ttfts"].__setitem__(3, -0.05), "ttfts[3]", "cannot be negative"),
        (VLLM, lambda d: d["ttfts"].__setitem__(3, d["latencies"][3] + 1), "ttfts[3]", "after the end"),
        (VLLM, lambda d: d["output_lens"].__setitem__(2, 0), "output_lens[2]", "no output token"),
        (VLLM, lambda d: d.update(completed=5), "completed", "30 requests have no error"),
        (VLLM_SUMMARY, lambda d: d.update(p99_ttft_ms=1.0), "p99_ttft_ms", "cannot be lower"),
        (
            GUIDELLM,
            lambda d: d["benchmarks"][1]["requests"]["successful"][3].update(time_to_first_token_ms=-70),
            "benchmarks[1].requests.successful[3].time_to_first_token_ms",
            "cannot be negative",
        ),
        (AIPERF, lambda d: d["time_to_first_token"].update(avg=-5), "time_to_first_token.avg", "cannot be negative"),
        (VLLM, lambda d: d["input_lens"].__setitem__(2, 12.5), "input_lens[2]", "whole number"),
        # vLLM refuses an empty prompt; a failed request's output is 0 tokens, never fewer
        (VLLM, lambda d: d["input_lens"].__setitem__(3, 0), "input_lens[3]", "whole number of tokens >= 1, got 0"),
        (VLLM, lambda d: d["output_lens"].__setitem__(3, -4), "output_lens[3]", "tokens >= 0, got -4"),
        # refused in the report, not in the trace made from it, whose temporary file the user never saw (trial E7)
        (VLLM, lambda d: d["input_lens"].__setitem__(0, 10**12), "input_lens[0]", "1,000,000,000,000 tokens, beyond"),
        # send times are perf_counter readings within the run's duration (15.46 s) of the first send
        (VLLM, lambda d: d["start_times"].__setitem__(5, -100), "start_times[5]", "cannot be negative, got -100"),
        (VLLM, lambda d: d["start_times"].__setitem__(5, 100), "start_times[5]", "13383.7 s before the median send"),
        (VLLM, lambda d: d["start_times"].__setitem__(29, 13500), "start_times[29]", "more than the run's duration"),
        (VLLM, lambda d: d["latencies"].__setitem__(29, 5.0), "latencies[29]", "ends 19.6669 s after the first send"),
        (
            GUIDELLM,
            lambda d: d["benchmarks"][1]["requests"]["successful"][3].update(request_start_time=-1),
            "benchmarks[1].requests.successful[3].request_start_time",
            "a send time cannot be negative",
        ),
        (VLLM, lambda d: d.update(request_rate=-1), "request_rate", "positive"),
        (GUIDELLM, lambda d: d["benchmarks"][0]["config"]["strategy"].update(type_="chaos"), "strategy.type_", "chaos"),
        (
            GUIDELLM,
            lambda d: d["benchmarks"][1]["requests"]["successful"][3].update(time_to_first_token_ms="x"),
            "benchmarks[1].requests.successful[3].time_to_first_token_ms",
            "expected a number",
        ),
        (GUIDELLM, lambda d: d.update(benchmarks=[]), "benchmarks", "no benchmarks"),
        (  # served with a 0-token prompt before, TPOT NaN (cold trial E4)
            GUIDELLM,
            lambda d: d["benchmarks"][1]["requests"]["successful"][3].pop("prompt_tokens"),
            "benchmarks[1].requests.successful[3].prompt_tokens",
            "missing",
        ),
        (AIPERF, lambda d: d["time_to_first_token"].update(unit="weeks"), "time_to_first_token.unit", "weeks"),
        (AIPERF, lambda d: d["input_config"].pop("phases"), "input_config", "no load"),
        (AIPERF, lambda d: d["input_config"]["phases"][1].update(type="fixed_schedule"), "phases[1].type", "not read"),
        (RANGE, lambda d: d.update(status="error"), "status", "did not succeed"),
        (RANGE, lambda d: d["data"]["result"][0]["values"][3].__setitem__(1, "many"), "values[3]", "not a finite"),
        (RANGE, lambda d: [s["metric"].pop("__name__") for s in d["data"]["result"]], "data.result", "no vLLM"),
    ],
)
def test_wrong_field_is_named(
    tmp_path: Path, source: Path, edit: Callable[[Any], None], field: str, message: str
) -> None:
    path = edited(tmp_path, source, edit)
    error = error_of(path)
    assert error.source == str(path) and field in error.field and message in error.message, error


def test_metrics_without_vllm_series(tmp_path: Path) -> None:
    other = tmp_path / "metrics.txt"
    other.write_text("".join(line + "\n" for line in METRICS.read_text().splitlines() if "vllm:" not in line))
    assert other.read_text().startswith("# HELP python_gc")
    error = error_of(other)
    assert (error.field, error.source) == ("vllm:*", str(other)) and "no vLLM series" in error.message


def test_metrics_sample_that_is_not_a_number(tmp_path: Path) -> None:
    bad = tmp_path / "metrics.txt"
    text = METRICS.read_text()
    bad.write_text(text + 'vllm:num_requests_running{engine="1"} zero\n')
    error = error_of(bad)
    assert error.field == f"line {len(text.splitlines()) + 1} vllm:num_requests_running" and "zero" in error.message


def test_bucket_counts_that_fall_are_refused_in_a_snapshot_and_levelled_in_a_range_query(tmp_path: Path) -> None:
    """A server's cumulative counts never fall (nor their sums over label sets, nor a difference of two snapshots
    of one server): a snapshot where they do was edited or damaged. A range query's increases come from points
    sampled apart: a fall there is levelled, as histogram_quantile does, and said in the run's notes."""
    bad = tmp_path / "metrics.txt"
    line = 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.06",'
    edited_lines = [
        row.replace("} 20.0", "} 9.0") if row.startswith(line) else row for row in METRICS.read_text().splitlines()
    ]
    bad.write_text("\n".join(edited_lines) + "\n")
    error = error_of(bad)
    assert (error.source, error.field) == (str(bad), "vllm:time_to_first_token_seconds_bucket")
    assert "falls from 16 at le=0.04 to 9 at le=0.06" in error.message
    data = json.loads(RANGE.read_text())
    for series in data["data"]["result"]:
        if (
            series["metric"]["__name__"] == "vllm:time_to_first_token_seconds_bucket"
            and series["metric"]["le"] == "0.06"
        ):
            series["values"][-1][1] = "9"
    levelled = tmp_path / "query_range.json"
    levelled.write_text(json.dumps(data))
    (run_,) = read_report(levelled).runs
    assert run_.truth.ttft_levels_s[16 / 30] == 0.04 and 9 / 30 not in run_.truth.ttft_levels_s
    assert run_.truth.measured["ttft_p50"] == pytest.approx(0.02 + 0.02 * (15 - 3) / (16 - 3))  # as unedited
    assert any(note.startswith("ttft: bucket counts that fell between bounds") for note in run_.notes)
    (unedited,) = read_report(RANGE).runs
    assert unedited.notes == ()


def test_an_inf_bucket_below_the_last_finite_one_is_refused_in_a_snapshot(tmp_path: Path) -> None:
    bad = tmp_path / "metrics.txt"
    line = 'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",'
    rows = METRICS.read_text().splitlines()
    edited = [row.replace("} 30.0", "} 29.0") if row.startswith(line) else row for row in rows]
    assert edited != rows
    bad.write_text("\n".join(edited) + "\n")
    error = error_of(bad)
    assert (error.source, error.field) == (str(bad), "vllm:time_to_first_token_seconds_bucket")
    assert "+Inf bucket's count 29 is below the count 30 at le=2560" in error.message


@pytest.mark.parametrize("cut", ['le="+Inf"', "_count", "_sum"])
def test_a_histogram_cut_off_after_its_buckets_is_refused(tmp_path: Path, cut: str) -> None:
    """A snapshot cut mid-histogram (or a query without a series) read its missing _sum or _count as 0: a TTFT mean
    of 0 ms, exit 0 (cold trial E1). Each of +Inf, _count and _sum is required once a histogram has buckets."""
    name = "vllm:time_to_first_token_seconds"
    rows = METRICS.read_text().splitlines()
    kept = [row for row in rows if not (row.startswith(name) and cut in row.split(" ")[0])]
    assert len(kept) < len(rows)
    bad = tmp_path / "metrics.txt"
    bad.write_text("\n".join(kept) + "\n")
    error = error_of(bad)
    expected = {'le="+Inf"': '_bucket{le="+Inf"}', "_count": "_count", "_sum": "_sum"}[cut]
    assert (error.source, error.field) == (str(bad), name + expected)
    assert error.message.startswith("missing, though")
    data = json.loads(RANGE.read_text())
    data["data"]["result"] = [s for s in data["data"]["result"] if s["metric"]["__name__"] != f"{name}_sum"]
    query = tmp_path / "query_range.json"
    query.write_text(json.dumps(data))
    assert error_of(query).field == f"{name}_sum"


def test_levelled_token_histograms_are_noted_in_a_range_query(tmp_path: Path) -> None:
    """The prompt and output token histograms give the runs' mean lengths: a fall levelled there is said too."""
    data = json.loads(RANGE.read_text())
    name = "vllm:time_to_first_token_seconds_bucket"
    ttft = next(s for s in data["data"]["result"] if s["metric"]["__name__"] == name)
    start, end = ttft["values"][0][0], ttft["values"][-1][0]
    for le, grown in (("50", "20"), ("100", "12"), ("+Inf", "30")):
        metric = ttft["metric"] | {"__name__": "vllm:request_prompt_tokens_bucket", "le": le}
        data["data"]["result"].append({"metric": metric, "values": [[start, "0"], [end, grown]]})
    for part, grown in (("_count", "30"), ("_sum", "2400")):
        metric = {k: v for k, v in ttft["metric"].items() if k != "le"} | {
            "__name__": f"vllm:request_prompt_tokens{part}"
        }
        data["data"]["result"].append({"metric": metric, "values": [[start, "0"], [end, grown]]})
    levelled = tmp_path / "query_range.json"
    levelled.write_text(json.dumps(data))
    (run_,) = read_report(levelled).runs
    assert [note for note in run_.notes if "levelled" in note] == [
        "prompt tokens: bucket counts that fell between bounds (series sampled apart) were levelled, as "
        "histogram_quantile does"
    ]


def test_snapshots_in_the_wrong_order(tmp_path: Path) -> None:
    after = REPORTS / "prometheus-2.42" / "metrics-after.txt"
    error = error_of(REPORTS / "prometheus-2.42" / "metrics-before.txt", after)
    assert error.field.startswith("vllm:") and "went down" in error.message


def test_aiperf_records_with_a_cut_line(tmp_path: Path) -> None:
    cut = tmp_path / "profile_export.jsonl"
    text = RECORDS.read_text()
    cut.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 200])
    error = error_of(cut)
    assert error.field == "line 28" and "not valid JSON" in error.message


def test_records_missing_a_metric(tmp_path: Path) -> None:
    lines = RECORDS.read_text().splitlines()
    row = json.loads(lines[10])
    del row["metrics"]["time_to_first_token"]
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join([*lines[:10], json.dumps(row), *lines[11:]]) + "\n")
    error = error_of(path)
    assert error.field == "line 11.metrics.time_to_first_token" and "missing" in error.message


def test_records_with_a_negative_send_time(tmp_path: Path) -> None:
    lines = RECORDS.read_text().splitlines()
    row = json.loads(lines[10])
    row["metadata"]["request_start_ns"] = -1
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join([*lines[:10], json.dumps(row), *lines[11:]]) + "\n")
    error = error_of(path)
    assert error.field == "line 11.metadata.request_start_ns" and "cannot be negative" in error.message


@pytest.mark.parametrize(
    ("metric", "value", "least"), [("input_sequence_length", 0, 1), ("output_sequence_length", -3, 0)]
)
def test_records_with_a_token_count_out_of_range(tmp_path: Path, metric: str, value: int, least: int) -> None:
    lines = RECORDS.read_text().splitlines()
    row = json.loads(lines[10])
    row["metrics"][metric]["value"] = value
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join([*lines[:10], json.dumps(row), *lines[11:]]) + "\n")
    error = error_of(path)
    assert error.field == f"line 11.metrics.{metric}.value"
    assert error.message == f"expected a number of tokens >= {least}, got {value}"


def test_unknown_documents(tmp_path: Path) -> None:
    for name, text in (("x.json", '{"hello": 1}'), ("x.txt", "hello world, this is prose\nand more\n")):
        path = tmp_path / name
        path.write_text(text)
        assert "not a report ttftsim reads" in error_of(path).message
    genai = tmp_path / "profile_export.json"
    genai.write_text('{"experiments": []}')
    assert "profile_export_genai_perf.json" in error_of(genai).message


def test_before_is_only_for_a_snapshot() -> None:
    error = error_of(VLLM, METRICS)
    assert error.source == "--before" and str(VLLM) in error.message  # which report (cold trial E12)


def test_a_folder_that_is_not_an_inference_perf_report_says_what_a_folder_must_hold(tmp_path: Path) -> None:
    """It said 'report file is a directory, not a regular file' (cold trial E12)."""
    error = error_of(tmp_path)
    assert error.source == str(tmp_path) and "without config.yaml or summary_lifecycle_metrics.json" in error.message


def test_a_report_needs_a_deployment_and_a_metrics_file_a_workload() -> None:
    with pytest.raises(InputError, match="give --deployment"), measured_cases(VLLM):
        pass
    with pytest.raises(InputError, match="workload") as caught, measured_cases(RANGE, DEPLOYMENT):
        pass
    assert caught.value.source == str(DEPLOYMENT)


def test_deployment_that_is_not_a_scenario(tmp_path: Path) -> None:
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text("model: Llama-3.1-8B\nengine: {max_num_seqs: -3}\n")
    with pytest.raises(InputError) as caught, measured_cases(VLLM, deployment):
        pass
    # a wrong value is named before a missing field (hardware): it may be why another is missing
    assert caught.value.source == str(deployment) and "engine.max_num_seqs" in caught.value.field


@pytest.mark.parametrize(
    ("edit", "field", "needle"),
    [
        (("hardware: CPU-host", "hardware: TPU-v9"), "hardware", "unknown hardware 'TPU-v9'"),
        (("model: cpu-server-model/config.json", "model: nosuch/Model-99B"), "model", "unknown model"),
    ],
    ids=["hardware", "model"],
)
def test_what_the_deployment_sets_wrong_names_the_deployment(
    tmp_path: Path, edit: tuple[str, str], field: str, needle: str
) -> None:
    """Not a skipped run (exit 1 on stdout): one line naming the deployment file, exit 2, for accuracy and fit."""
    model = str(REPORTS / "cpu-server-model" / "config.json")
    deployment = tmp_path / "deploy.yaml"
    deployment.write_text(DEPLOYMENT.read_text().replace(*edit).replace("cpu-server-model/config.json", model))
    with pytest.raises(InputError) as caught, measured_cases(VLLM, deployment):
        pass
    assert (caught.value.source, caught.value.field) == (str(deployment), field) and needle in caught.value.message
    _assert_one_line_error(run("accuracy", str(VLLM), "--deployment", str(deployment)), str(deployment), needle)
    fit = run("fit", str(VLLM), str(VLLM_SUMMARY), "--deployment", str(deployment), "-o", str(tmp_path / "c.json"))
    _assert_one_line_error(fit, str(deployment), needle)


_WRONG = (None, "x", -1, 1e300, [], {}, True)


@pytest.mark.parametrize("source", [VLLM, GUIDELLM, AIPERF, RANGE], ids=lambda p: p.parent.name)
def test_edited_reports_never_raise_anything_else(tmp_path: Path, source: Path) -> None:
    """Seeded edits of the real reports (a field removed or given a wrong value, a list cut): each is read
    or refused with an InputError, and what is read becomes a case or an InputError."""
    deployment = with_workload(tmp_path)  # a Prometheus report takes the deployment's workload
    for data in _edits(json.loads(source.read_text()), random.Random(20), 120):
        path = tmp_path / source.name
        path.write_text(json.dumps(data))
        try:
            with measured_cases(path, deployment):
                pass
        except InputError:
            pass


def _edits(original: Any, rng: random.Random, count: int) -> Any:
    """`count` seeded copies of a parsed report, each with one field removed, a list cut or a wrong value."""
    paths = list(_paths(original))
    for _ in range(count):
        data = json.loads(json.dumps(original))
        parent, key = _resolve(data, rng.choice(paths))
        roll = rng.random()
        if roll < 0.3 and isinstance(parent, dict):
            del parent[key]
        elif roll < 0.4 and isinstance(parent[key], list):
            del parent[key][len(parent[key]) // 2 :]
        else:
            parent[key] = rng.choice(_WRONG)
        yield data


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> Any:
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in list(items)[:40]:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


def _resolve(data: Any, path: tuple[Any, ...]) -> tuple[Any, Any]:
    for key in path[:-1]:
        data = data[key]
    return data, path[-1]


@pytest.mark.parametrize(
    "make",
    [
        lambda tmp: _write(tmp / "cut.json", VLLM.read_text()[:3000]),
        lambda tmp: edited(tmp, GUIDELLM, lambda d: d["benchmarks"][0]["config"]["strategy"].pop("streams")),
        lambda tmp: _write(
            tmp / "metrics.txt", "# HELP process_cpu_seconds_total CPU\nprocess_cpu_seconds_total 1.5\n"
        ),
        lambda tmp: edited(tmp, VLLM, lambda d: d["start_times"].__setitem__(5, -100)),
    ],
    ids=["truncated", "missing-field", "no-vllm-series", "negative-send"],
)
def test_cli_says_it_on_one_line(tmp_path: Path, make: Callable[[Path], Path]) -> None:
    bad = make(tmp_path)
    _assert_one_line_error(run("accuracy", str(bad), "--deployment", str(DEPLOYMENT)), str(bad))


def test_cli_without_a_deployment() -> None:
    _assert_one_line_error(run("accuracy", str(VLLM)), str(VLLM), "--deployment")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


IPERF = REPORTS / "inference-perf-0.7.0" / "shared-prefix-constant"


def _iperf_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "iperf"
    folder.mkdir()
    for path in IPERF.iterdir():
        (folder / path.name).write_text(path.read_text())
    return folder


@pytest.mark.parametrize(
    ("edit", "field", "needle"),
    [
        (lambda f: (f / "config.yaml").unlink(), "config.yaml", "missing"),
        (
            lambda f: (f / "config.yaml").write_text(
                (f / "config.yaml").read_text().replace("type: constant", "type: concurrent")
            ),
            "load.type",
            "concurrent: not read",
        ),
        (
            lambda f: (f / "config.yaml").write_text((f / "config.yaml").read_text().replace("rate: 2.0", "rate: 0.0")),
            "load.stages[0].rate",
            "expected a positive number",
        ),
        (lambda f: (f / "stage_1_lifecycle_metrics.json").unlink(), "stage_1_lifecycle_metrics.json", "missing"),
        (
            lambda f: (f / "stage_0_lifecycle_metrics.json").write_text(
                (f / "stage_0_lifecycle_metrics.json").read_text()[:500]
            ),
            "stage_0_lifecycle_metrics.json",
            "",
        ),
        (
            lambda f: (f / "per_request_lifecycle_metrics.json").write_text(
                json.dumps(json.loads((f / "per_request_lifecycle_metrics.json").read_text())[:-1])
            ),
            "",
            "69 requests, but the stage reports count 70",
        ),
        (
            lambda f: (f / "per_request_lifecycle_metrics.json").write_text(
                (f / "per_request_lifecycle_metrics.json")
                .read_text()
                .replace('"start_time": 34675.', '"start_time": -3.', 1)
            ),
            "[0].start_time",
            "a send time cannot be negative, got -3.41514",
        ),
    ],
    ids=["no-config", "concurrent", "zero-rate", "no-stage", "truncated-stage", "requests-missing", "negative-send"],
)
def test_inference_perf_folder_problems_are_one_line(
    tmp_path: Path, edit: Callable[[Path], None], field: str, needle: str
) -> None:
    folder = _iperf_copy(tmp_path)
    edit(folder)
    result = run("accuracy", str(folder), "--deployment", str(DEPLOYMENT))
    _assert_one_line_error(result, str(folder), field, needle)


def test_edited_inference_perf_reports_never_raise_anything_else(tmp_path: Path) -> None:
    """Seeded edits of the per-request report, a stage report (read without the per-request one, so its
    percentiles are what is read) and the configuration: each read or refused with an InputError."""
    folder = _iperf_copy(tmp_path)
    rng = random.Random(7)
    for name in ("per_request_lifecycle_metrics.json", "stage_0_lifecycle_metrics.json", "config.yaml"):
        if name.startswith("stage"):
            (folder / "per_request_lifecycle_metrics.json").unlink()
        text = (IPERF / name).read_text()
        original = yaml.safe_load(text) if name.endswith(".yaml") else json.loads(text)
        for data in _edits(original, rng, 60):
            (folder / name).write_text(yaml.safe_dump(data) if name.endswith(".yaml") else json.dumps(data))
            try:
                with measured_cases(folder, DEPLOYMENT):
                    pass
            except InputError:
                pass
        (folder / name).write_text(text)


def test_a_measured_run_file_without_runs_is_an_input_error(tmp_path: Path) -> None:
    """`[]` (or a CSV header alone) scored nothing and exited 1 as if every stage were overloaded (cold trial E8)."""
    from ttftsim.accuracy.ground_truth import read_ground_truth

    empty = tmp_path / "runs.json"
    empty.write_text("[]\n")
    with pytest.raises(InputError, match="expected a JSON list of runs, got an empty one"):
        read_ground_truth(empty)
    header = tmp_path / "points.csv"
    header.write_text("model,isl,osl,concurrency,tp_size,silicon_ttft_ms,silicon_tpot_ms\n")
    with pytest.raises(InputError, match="no closed-loop points"):
        read_ground_truth(header)
    _assert_one_line_error(run("accuracy", str(empty), "--deployment", str(DEPLOYMENT)), str(empty))


def test_a_summary_at_rate_inf_without_max_concurrency_says_how_it_is_read(tmp_path: Path) -> None:
    """vllm bench writes max_concurrency (null without the flag): a report without the key is read as every
    request sent at once, as vllm bench sends them then, and says so (cold trial E3 saw it read so silently)."""
    renamed = edited(tmp_path, VLLM_SUMMARY, lambda d: d.update(concurrency=d.pop("max_concurrency")))
    (run_,) = read_report(renamed).runs
    assert run_.load.concurrency == 24
    assert run_.notes[0].startswith("no max_concurrency field (an older or edited report): every request sent at once")
    (unedited,) = read_report(VLLM_SUMMARY).runs
    assert unedited.load.concurrency == 4 and not any("at once" in note for note in unedited.notes)
