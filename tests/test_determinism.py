"""Same inputs and seed, same bytes: every `--json` output, summary.json and plan.json is identical run after
run; what may differ (the wall time, a plan's tasks taken from its checkpoint) is only in run.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.accuracy.test_harness import RUN
from tests.test_cli import run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TRAFFIC = """workload:
  type: synthetic
  arrivals: {type: poisson, rate: 5}
  prompt_tokens: {type: lognormal, mean: 500, std: 200, high: 2000}
  output_tokens: {type: lognormal, mean: 50, std: 20, high: 200}
"""
SCENARIO = f"""name: tiny
model: Llama-3.1-8B
hardware: H100-SXM5-80GB
engine: {{max_model_len: 8192}}
{TRAFFIC}  duration_s: 10
slo: {{ttft_p99_s: 0.5}}
seed: 7
"""
CLUSTER = f"""{SCENARIO}metrics_window_s: 5
cluster:
  node_pools: [{{name: h100, hardware: H100-SXM5-80GB, gpus_per_node: 4, initial_nodes: 1, max_nodes: 2}}]
  autoscaling: {{min_replicas: 2, max_replicas: 3, metrics: [{{name: num_requests_waiting, target: 5}}]}}
"""
PLAN = f"""name: tiny-plan
model: Llama-3.1-8B
engine: {{max_model_len: 4096}}
{TRAFFIC}  num_requests: 200
slo: {{ttft_p99_s: 0.5}}
search: {{hardware: [H100-SXM5-80GB], tensor_parallel_size: [1]}}
probe_requests: 100
confirm_s: 20
confirm_top: 1
seed: 1
"""


def _twice(*args: str) -> str:
    first, second = run(*args), run(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    return first.stdout


@pytest.mark.parametrize("text", [SCENARIO, CLUSTER], ids=["replica", "cluster"])
def test_simulate_json_and_result_files_are_identical(tmp_path: Path, text: str) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(text)
    first, second = (run("simulate", str(scenario), "--json", "--out", str(tmp_path / out)) for out in "12")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert "wall_s" not in first.stdout
    assert (tmp_path / "1" / "summary.json").read_text() == first.stdout  # the same summary, the same bytes
    names = sorted(p.name for p in (tmp_path / "1").iterdir())
    assert "run.json" in names and "summary.json" in names
    for name in names:
        if name != "run.json":
            assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes(), name
    assert set(json.loads((tmp_path / "1" / "run.json").read_text())) == {"wall_s"}


def test_compare_json_is_identical(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(SCENARIO)
    second.write_text(SCENARIO.replace("max_model_len: 8192", "max_model_len: 8192, max_num_seqs: 8"))
    assert json.loads(_twice("compare", str(first), str(second), "--json"))["warnings"] == []


def test_plan_json_and_plan_file_are_identical_fresh_or_resumed(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    outputs = []
    for out, extra in (("1", ()), ("2", ()), ("1", ("--resume",))):
        result = run("plan", str(plan), "--json", "--workers", "1", "--out", str(tmp_path / out), *extra)
        assert result.returncode == 0, result.stderr
        outputs.append((result.stdout, (tmp_path / out / "plan.json").read_text()))
    assert outputs[0] == outputs[1] == outputs[2]
    assert "tasks" not in json.loads(outputs[0][0])
    tasks = json.loads((tmp_path / "1" / "run.json").read_text())["tasks"]
    assert tasks["computed"] == 0 and tasks["from_checkpoint"] > 0  # the resumed run's, apart from the result
    marked = json.loads((tmp_path / "1" / "complete.json").read_text())["files"]
    assert "plan.json" in marked and "run.json" not in marked  # beside the result, not part of it (docs/results.md)
    shown = run("plan", str(plan), "--workers", "1", "--out", str(tmp_path / "3")).stdout
    assert f"wrote {tmp_path / '3'}/: plan.json, " + ", ".join(sorted(set(marked) - {"plan.json"})) in shown


def test_validate_json_is_identical() -> None:
    assert json.loads(_twice("validate", str(EXAMPLES / "validate" / "deploy.yaml"), "--json"))["passed"]


def test_accuracy_json_is_identical(tmp_path: Path) -> None:
    path = tmp_path / "runs.json"
    path.write_text(json.dumps([RUN]))
    assert json.loads(_twice("accuracy", str(path), "--json"))["stages"]
