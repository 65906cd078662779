"""`ttftsim simulate` as a user runs it: outputs, exit codes, and one-line errors for bad scenario files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim.simulation_result import refusal_warnings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama31-8b-h100.yaml"


def test_simulate_json_and_outputs(tmp_path: Path) -> None:
    result = run("simulate", str(EXAMPLE), "--json", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["requests"]["finished"] > 900 and summary["slo"]["met"] is True
    assert summary["warnings"] == []  # Llama-3.1-8B: nothing read and left unmodelled
    for name in ("requests.parquet", "requests.csv", "steps.parquet", "timeseries.csv", "summary.json", "metrics.prom"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert "vllm:time_to_first_token_seconds_bucket" in (tmp_path / "metrics.prom").read_text()


def test_same_seed_same_numbers_and_seed_changes_them() -> None:
    first = json.loads(run("simulate", str(EXAMPLE), "--json").stdout)
    second = json.loads(run("simulate", str(EXAMPLE), "--json").stdout)
    other = json.loads(run("simulate", str(EXAMPLE), "--json", "--seed", "9").stdout)
    first.pop("simulation"), second.pop("simulation"), other.pop("simulation")
    assert first == second
    assert first["ttft_s"] != other["ttft_s"]


def test_a_sliding_window_kept_in_the_kv_cache_warns_without_failing_the_run(tmp_path: Path) -> None:
    """Mistral-7B-v0.1 frees the blocks out of its window (kvcache/windowed.py): no warning; with KV offloading
    (a KV connector, beside which the windowed manager does not run) the run says the window is kept."""
    scenario = tmp_path / "mistral.yaml"
    text = EXAMPLE.read_text().replace("model: Llama-3.1-8B", "model: Mistral-7B-v0.1")
    scenario.write_text(text.replace("duration_s: 120", "duration_s: 10"))
    assert json.loads(run("simulate", str(scenario), "--json").stdout)["warnings"] == []
    scenario.write_text(
        scenario.read_text().replace('vllm_version: "0.15.1"', 'vllm_version: "0.15.1"\n  kv_offloading_size: 4')
    )
    shown = run("simulate", str(scenario))
    assert shown.returncode == 0, shown.stderr
    assert "warning: sliding_window=4096 (Mistral-7B-v0.1) is modelled in attention time but not in" in shown.stdout
    warnings = json.loads(run("simulate", str(scenario), "--json").stdout)["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith("sliding_window=4096 (Mistral-7B-v0.1) is modelled")


@pytest.mark.parametrize(("version", "warned"), [("0.99", True), ("1.0.2", True), ("0.34.4", False), ("0.20", False)])
def test_a_version_newer_than_every_profile_is_said_to_use_the_newest(
    tmp_path: Path, version: str, warned: bool
) -> None:
    # engine_versions.yaml's newest profile is 0.34: a later release gets its defaults, said in a warning;
    # a patch release of 0.34, or 0.20 (a profile of its own), is modelled as documented
    scenario = tmp_path / "new.yaml"
    text = EXAMPLE.read_text().replace('vllm_version: "0.15.1"', f'vllm_version: "{version}"')
    scenario.write_text(text.replace("duration_s: 120", "duration_s: 5"))
    result = run("simulate", str(scenario), "--json")
    assert result.returncode == 0, result.stderr
    expected = (
        f"vLLM {version} is newer than every modelled version (0.10, 0.14, 0.15, 0.19, 0.20, 0.23, 0.28, 0.32, "
        "0.33, 0.34): predicted with 0.34's defaults (gpu_memory_utilization, batch limits, async scheduling, "
        "API-server costs); check that release's notes for changed defaults"
    )
    assert json.loads(result.stdout)["warnings"] == ([expected] if warned else [])
    assert json.loads(result.stdout)["config"]["engine"]["vllm_version"] == version  # the version modelled, recorded


def test_rejected_requests_are_said_with_their_reason_when_they_miss_the_slo(tmp_path: Path) -> None:
    """A limit that refuses requests (max_model_len below some prompts) misses the SLO with no latency figure;
    the summary says how many were refused and why, not only that they were never served."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("engine:", "engine:\n  max_model_len: 3000"))
    result = run("simulate", str(scenario), "--json")
    assert result.returncode == 1
    summary = json.loads(result.stdout)
    rejected = summary["requests"]["rejected"]
    assert rejected > 0
    [warning] = summary["warnings"]
    assert warning.startswith(f"{rejected} of {summary['requests']['arrived']:,} requests rejected, never served: ")
    assert re.search(r"e\.g\. prompt \d+ \+ output \d+ tokens exceed max_model_len 3000 ", warning), warning


def test_refusals_are_grouped_by_kind_most_frequent_first() -> None:
    rows = pd.DataFrame(
        {
            "status": ["finished", "rejected", "failed", "rejected", "rejected", "aborted", "rejected", "failed"],
            "reason": [
                "",
                "HTTP 503: 12 unfinished requests, max_num_queued_reqs 12",
                "no ready replica (attempt 3)",
                "prompt 4088 + output 37 tokens exceed max_model_len 4096",
                "prompt 5000 + output 1 tokens exceed max_model_len 4096",
                "client timeout after 5 s",
                None,
                "prompt 9 + output 9 tokens exceed max_model_len 16",  # a failure alike a rejection: its own kind
            ],
        }
    )
    assert refusal_warnings(rows) == [
        "2 of 8 requests rejected, never served: e.g. prompt 4088 + output 37 tokens exceed max_model_len 4096" + TAIL,
        "1 of 8 requests failed, never served: e.g. no ready replica (attempt 3)" + TAIL,
        "1 of 8 requests failed, never served: e.g. prompt 9 + output 9 tokens exceed max_model_len 16" + TAIL,
        "1 of 8 requests rejected, never served: e.g. no reason recorded" + TAIL,
        "1 of 8 requests rejected, never served: e.g. HTTP 503: 12 unfinished requests, max_num_queued_reqs 12" + TAIL,
    ]
    assert refusal_warnings(rows[rows["status"] == "finished"]) == []
    # streams cut when their replica was lost had their first token: not "never served" (cold trial E9)
    lost = pd.DataFrame(
        {
            "status": ["failed", "failed", "failed"],
            "reason": ["replica 0 lost in a node failure (attempt 1)"] * 2 + ["no ready replica (attempt 3)"],
            "first_token_s": [12.5, 14.0, np.nan],
        }
    )
    assert refusal_warnings(lost) == [
        "2 of 3 requests failed mid-stream, after their first token: e.g. replica 0 lost in a node failure (attempt "
        "1)" + TAIL,
        "1 of 3 requests failed, never served: e.g. no ready replica (attempt 3)" + TAIL,
    ]


TAIL = " (every request's reason: the reason column of requests.csv, written with --out)"


def test_unmet_slo_exits_1(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("ttft_p99_s: 0.5", "ttft_p99_s: 0.01"))
    result = run("simulate", str(scenario))
    assert result.returncode == 1
    judged = r"SLO TTFT P99 <= 10 ms: NOT met \(got [0-9,]+ ms over all arrivals by nearest rank, as an SLO is judged\)"
    assert re.search(judged, result.stdout), result.stdout


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (("rate: 8", "rate: -8"), "workload.arrivals.rate"),
        (("engine:", "engine:\n  max_num_seqz: 4"), "engine.max_num_seqz"),
        (("hardware: H100-SXM5-80GB", "hardware: TPU-v9"), "hardware"),
        (("model: Llama-3.1-8B", "model: GPT-9"), "model"),
        (("duration_s: 120", "duration_s: soon"), "workload.duration_s"),
        (("type: poisson", "type: bursty"), "workload.arrivals.type"),
        (('vllm_version: "0.15.1"', 'vllm_version: "0.2.0"'), "engine.vllm_version"),
        (('vllm_version: "0.15.1"', 'vllm_version: "latest"'), "engine.vllm_version: vLLM version 'latest' is not a"),
        (("engine:", "engine:\n  tensor_parallel_size: 3"), "engine.tensor_parallel_size: tensor parallel size 3"),
        (("engine:", "engine:\n  max_model_len: 999999"), "engine.max_model_len: max_model_len 999999 exceeds"),
        (("engine:", "engine:\n  max_num_seqs: 60000"), "engine.max_num_seqs: max_num_batched_tokens (8192) must"),
        # a file the scenario names that is not there: the scenario's field is named, not the missing file
        (("engine:", "engine:\n  calibration: nope.json"), "bad.yaml: engine.calibration: no calibration file"),
        (("model: Llama-3.1-8B", "model: nope.json"), "bad.yaml: model: no model config.json at"),
        (("slo:", "slo:\n  ttft_s: 0"), "slo.ttft_s"),
    ],
)
def test_bad_scenario_is_one_line_naming_file_and_field(tmp_path: Path, edit: tuple[str, str], field: str) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(EXAMPLE.read_text().replace(*edit))
    _assert_one_line_error(run("simulate", str(scenario)), str(scenario), field)


def test_missing_and_unparsable_scenario(tmp_path: Path) -> None:
    _assert_one_line_error(run("simulate", str(tmp_path / "none.yaml")), "file not found")
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [\n")
    _assert_one_line_error(run("simulate", str(broken)), "not valid YAML")


def test_model_that_does_not_fit_is_refused(tmp_path: Path) -> None:
    scenario = tmp_path / "big.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("model: Llama-3.1-8B", "model: Llama-3.1-70B"))
    _assert_one_line_error(run("simulate", str(scenario)), "needs 141.1 GB of weights")


CLUSTER = Path(__file__).resolve().parents[1] / "examples" / "cluster-spike.yaml"


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (("max_nodes: 3", "max_nodes: 3\n      gpus: 2"), "cluster.node_pools.0.gpus"),
        (("initial_nodes: 1", "initial_nodes: 9"), "cluster.node_pools.0"),
        (("min_replicas: 2", "min_replicas: 20"), "cluster.autoscaling"),
        (("target: 5", "target: 0"), "cluster.autoscaling.metrics.0.target"),
        (("name: num_requests_waiting", "name: gpu_util"), "cluster.autoscaling.metrics.0.name"),
        (("type: least_outstanding", "type: random"), "cluster.router.type"),
        (("hardware: H100-SXM5-80GB\n      gpus", "hardware: X9000\n      gpus"), "cluster.node_pools.0.hardware"),
        (("weights_source: network_volume", "weights_source: floppy"), "cluster.pod.weights_source"),
        (("warm_pool: 0", "warm_pool: -1"), "cluster.warm_pool"),
    ],
)
def test_bad_cluster_section_is_one_line_naming_the_field(tmp_path: Path, edit: tuple[str, str], field: str) -> None:
    scenario = tmp_path / "bad.yaml"
    text = CLUSTER.read_text()
    assert edit[0] in text
    scenario.write_text(text.replace(*edit, 1))
    _assert_one_line_error(run("simulate", str(scenario)), str(scenario), field)


def test_pods_that_fit_no_node_say_why_and_fail_the_slo(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.yaml"
    text = CLUSTER.read_text().replace("provision_s: 180", "provision_s: 180\n      cpus: 4")
    scenario.write_text(text.replace("{rate: 15, duration_s: 900}", "{rate: 15, duration_s: 60}"))
    result = run("simulate", str(scenario))
    assert result.returncode == 1, result.stderr
    assert "still Pending: pool h100: cpu request 8 > 4 allocatable" in result.stdout
    assert result.stdout.startswith("cluster-spike: Llama-3.1-8B on replicas of 1 x H100-SXM5-80GB (vLLM 0.15.1), ")
    assert " tokens) a replica; kernel times:" in result.stdout.splitlines()[0]  # not the cluster's capacity
    assert re.search(r"NOT met \(no figure: [0-9,]+ requests never served count as never answered\)", result.stdout)


@pytest.mark.parametrize(
    ("hardware", "choice", "used"),
    [
        ("H100-SXM5-80GB", None, "calibrated (h100-sxm5-80gb.json)"),  # auto, the default: a fit exists
        ("H100-SXM5-80GB", "roofline", "roofline (kernel_costs: roofline)"),
        ("A100-PCIe-80GB", None, "roofline (no calibration for A100-PCIe-80GB)"),  # auto without a fit
    ],
)
def test_kernel_times_used_are_named_in_the_summary(
    tmp_path: Path, hardware: str, choice: str | None, used: str
) -> None:
    text = EXAMPLE.read_text().replace("H100-SXM5-80GB", hardware)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text + (f"kernel_costs: {choice}\n" if choice else ""))
    result = run("simulate", str(scenario), "--json")
    assert result.returncode in (0, 1), result.stderr
    assert json.loads(result.stdout)["config"]["kernel_costs"] == used
    assert f"kernel times: {used}" in run("simulate", str(scenario)).stdout.replace("\n", " ")


def test_calibrated_kernel_times_on_a_gpu_without_a_fit_is_a_one_line_error(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("H100-SXM5-80GB", "A100-PCIe-80GB") + "kernel_costs: calibrated\n")
    _assert_one_line_error(run("simulate", str(scenario)), "kernel_costs")


def test_a_negative_seed_is_one_line_exit_2() -> None:
    for command in (("simulate", str(EXAMPLE)), ("compare", str(EXAMPLE), str(EXAMPLE))):
        _assert_one_line_error(run(*command, "--seed", "-1"), "--seed", "greater than or equal to 0")
        # as a scenario's seed: at most 64 bits (signed), or the result folder could not be read back
        _assert_one_line_error(run(*command, "--seed", str(2**63)), "--seed", "9223372036854775807")


def test_an_interval_short_of_95_percent_is_explained_under_the_table(tmp_path: Path) -> None:
    """20 requests: no order statistics bracket P99 with 95% coverage; the (NN%) beside it is said in words."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("duration_s: 120", "num_requests: 20"))
    shown = run("simulate", str(scenario)).stdout
    assert "interval coverage below 95% where too few requests lie beyond the percentile: P90 " in shown
    assert "P99.9 " in shown.split("interval coverage below 95%")[1]


def test_optimization_level_zero_runs_eagerly_end_to_end(tmp_path: Path) -> None:
    """-O0 (optimization_level 0) compiles and captures nothing: the summary says so, the KV cache gains the
    graphs' memory, and a synchronous engine's decode steps pay the eager host time (3 ms against a FULL graph's
    1.2 ms on the H100 profile), so TPOT rises; enforce_eager gives the same run."""
    text = EXAMPLE.read_text().replace('vllm_version: "0.15.1"', 'vllm_version: "0.15.1"\n  async_scheduling: false')
    default, level0, eager = tmp_path / "d.yaml", tmp_path / "o0.yaml", tmp_path / "e.yaml"
    default.write_text(text)
    level0.write_text(text.replace("async_scheduling: false", "async_scheduling: false\n  optimization_level: 0"))
    eager.write_text(text.replace("async_scheduling: false", "async_scheduling: false\n  enforce_eager: true"))
    runs = {}
    for path in (default, level0, eager):
        result = run("simulate", str(path), "--json")
        assert result.returncode in (0, 1), result.stderr
        runs[path.stem] = json.loads(result.stdout)
    assert "cudagraphs" not in runs["d"]["config"]["engine"]
    assert runs["o0"]["config"]["engine"]["cudagraphs"] == {"compiled": False, "mode": "NONE", "capture_sizes": []}
    assert runs["o0"]["config"]["kv_capacity_tokens"] > runs["d"]["config"]["kv_capacity_tokens"]
    assert runs["o0"]["tpot_s"]["p50"] > runs["d"]["tpot_s"]["p50"] + 0.0015
    assert runs["e"]["tpot_s"] == runs["o0"]["tpot_s"] and runs["e"]["ttft_s"] == runs["o0"]["ttft_s"]


def test_admission_limits_shed_load_end_to_end(tmp_path: Path) -> None:
    """vLLM 0.29+'s --max-num-queued-reqs: past capacity (60 req/s on one H100 for 8B) the requests beyond 48
    unfinished are refused (HTTP 503), counted as rejected, and the served ones' TTFT stays short; every request
    is accounted for. Without the limit the queue grows to tens of seconds."""
    text = EXAMPLE.read_text().replace('vllm_version: "0.15.1"', 'vllm_version: "0.32.0"')
    text = text.replace("rate: 8}", "rate: 60}").replace("duration_s: 120", "duration_s: 20")
    unlimited, limited = tmp_path / "u.yaml", tmp_path / "l.yaml"
    unlimited.write_text(text)
    limited.write_text(text.replace('"0.32.0"', '"0.32.0"\n  max_num_queued_reqs: 48'))
    runs = {}
    for path in (unlimited, limited):
        result = run("simulate", str(path), "--json", "--out", str(tmp_path / path.stem))
        assert result.returncode in (0, 1), result.stderr
        runs[path.stem] = json.loads(result.stdout)
    counts = runs["l"]["requests"]
    assert counts["rejected"] > 0 and runs["u"]["requests"]["rejected"] == 0
    assert counts["arrived"] == counts["finished"] + counts["rejected"] + counts["in_flight"] + counts["aborted"]
    assert runs["l"]["ttft_s"]["p99"] < 1.0 < runs["u"]["ttft_s"]["p50"]
    import pandas as pd

    frame = pd.read_parquet(tmp_path / "l" / "requests.parquet")
    reasons = set(frame.loc[frame["status"] == "rejected", "reason"])
    assert reasons == {"HTTP 503: 48 unfinished requests, max_num_queued_reqs 48"}


def test_a_name_with_control_characters_or_of_a_page_is_refused(tmp_path: Path) -> None:
    """A scenario's name is printed in the terminal: an escape sequence in it would recolour the terminal."""
    for name, said in (
        ('"\\x1b[31mred"', "no control characters"),
        ("x" * 201, "a label of at most 200 characters (this one has 201)"),
    ):
        scenario = tmp_path / "s.yaml"
        scenario.write_text(EXAMPLE.read_text().replace("name: llama31-8b-h100-chat", f"name: {name}"))
        _assert_one_line_error(run("simulate", str(scenario)), "name", said)


def test_an_slo_in_milliseconds_written_as_seconds_is_warned(tmp_path: Path) -> None:
    scenario = tmp_path / "ms.yaml"
    text = EXAMPLE.read_text().replace("ttft_p99_s: 0.5", "ttft_p99_s: 500")
    scenario.write_text(text.replace("duration_s: 120", "duration_s: 5"))
    result = run("simulate", str(scenario), "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["warnings"][0].startswith("slo.ttft_p99_s is 500 s: targets are in seconds")
    shown = run("simulate", str(scenario))  # the header names the vLLM version modelled
    assert "Llama-3.1-8B on 1 x H100-SXM5-80GB (vLLM 0.15.1), " in shown.stdout.splitlines()[0]


def test_a_model_folder_named_bare_is_found_beside_the_scenario_not_in_the_working_folder(tmp_path: Path) -> None:
    """`model: mymodel` (a folder holding config.json, next to the scenario file) was looked up from where the
    command ran, as `model: mymodel/config.json` never was."""
    folder = tmp_path / "h" / "mymodel"
    folder.mkdir(parents=True)
    (tmp_path / "h" / "H100-SXM5-80GB").mkdir()  # a folder named as the GPU (an --out) hides no profile
    (folder / "config.json").write_text((ROOT / "ttftsim" / "model" / "presets" / "Llama-3.1-8B.json").read_text())
    scenario = tmp_path / "h" / "s.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("model: Llama-3.1-8B", "model: mymodel"))
    command = [sys.executable, "-m", "ttftsim", "simulate", "h/s.yaml", "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr
    assert json.loads(result.stdout)["config"]["model"] == "mymodel"


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        ("{type: trace, format: azure, path: nothere.csv}", "workload.path"),
        (
            "{type: synthetic, arrivals: {type: poisson, rate: 2}, num_requests: 5, prompt_tokens: {type: empirical, "
            "path: lens.csv}, output_tokens: {type: fixed, value: 4}}",
            "workload.prompt_tokens.path",
        ),
    ],
)
def test_a_file_the_workload_names_that_is_not_there_is_the_scenarios_error(
    tmp_path: Path, workload: str, field: str
) -> None:
    """It was the missing file's own error (`nothere.csv: trace file not found`), naming neither the scenario nor
    the field."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"model: Llama-3.1-8B\nhardware: H100-SXM5-80GB\nworkload: {workload}\n")
    _assert_one_line_error(run("simulate", str(scenario)), f"s.yaml: {field}: no such file")


@pytest.mark.parametrize(
    "cluster", [None, {"node_pools": [{"name": "a", "hardware": "A100-SXM4-80GB"}], "replicas": 2}]
)
def test_a_calibrated_range_left_is_in_the_summarys_warnings_in_every_run_of_the_process(
    cluster: dict[str, object] | None,
) -> None:
    """It was a `warning:` line on stderr only, and only for the first run of a process that left that range (a
    dashboard's or compare's second run said nothing): the summary now says it, run after run, a cluster's too
    (its pods run the scenario's own replica)."""
    from ttftsim.config.scenario import Scenario
    from ttftsim.simulate import simulate

    scenario = Scenario.model_validate(
        {
            "model": "Llama-3.1-8B",
            "hardware": "A100-SXM4-80GB",
            "engine": {"max_model_len": 32768},
            "workload": {
                "type": "synthetic",
                "arrivals": {"type": "poisson", "rate": 1},
                "prompt_tokens": {"type": "fixed", "value": 20000},  # one chunk of 8192 reads past 16384 pairs
                "output_tokens": {"type": "fixed", "value": 2},
                "num_requests": 2,
            },
            "cluster": cluster,
        }
    )
    for _ in range(2):
        extrapolated = [w for w in simulate(scenario).summary().warnings if "outside the calibrated range" in w]
        assert extrapolated and extrapolated[0].startswith("prefill_attention/bf16: isl=")


def test_a_cluster_run_writes_its_pods_and_hpa_syncs(tmp_path: Path) -> None:
    """docs/cluster.md lists pods (timeline, cold-start phases) and HPA decisions among a cluster run's outputs;
    `--out` wrote only their counts (cold trial D4). Two minutes of the spike example: the HPA syncs every 15 s."""
    scenario = tmp_path / "spike.yaml"
    text = (ROOT / "examples" / "cluster-spike.yaml").read_text()
    scenario.write_text(text.replace("- {rate: 15, duration_s: 600}", "- {rate: 15, duration_s: 120}", 1))
    scenario.write_text(
        scenario.read_text()
        .replace("      - {rate: 60, duration_s: 300}\n", "")
        .replace("      - {rate: 15, duration_s: 900}\n", "")
    )
    result = run("simulate", str(scenario), "--json", "--out", str(tmp_path / "out"))
    assert result.returncode in (0, 1), result.stderr
    summary = json.loads(result.stdout)
    pods = pd.read_csv(tmp_path / "out" / "pods.csv")
    assert len(pods) == summary["cluster"]["pods_created"]
    assert {"role", "node", "state", "created_s", "ready_s", "end_reason"} <= set(pods.columns)  # + phases if cold
    hpa = pd.read_csv(tmp_path / "out" / "hpa.csv")
    assert list(hpa["time_s"][:2]) == [15.0, 30.0] and {"current", "ready", "desired"} <= set(hpa.columns)


def test_a_missing_profile_file_names_the_scenario_the_field_and_where_it_was_looked_for(tmp_path: Path) -> None:
    """A relative path that exists nowhere was read from the working directory: 'error: /hw/x.yaml: file not
    found', naming neither the scenario nor the field (cold trial F6)."""
    (tmp_path / "scen").mkdir()
    scenario = tmp_path / "scen" / "s.yaml"
    scenario.write_text(EXAMPLE.read_text().replace("hardware: H100-SXM5-80GB", "hardware: ../hw/typo.yaml"))
    looked = (tmp_path / "hw" / "typo.yaml").resolve()
    _assert_one_line_error(run("simulate", str(scenario)), f"{scenario}: hardware: no profile file {looked}")
