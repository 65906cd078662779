"""A bad deployment calibration file (engine.calibration) is the user's input error in every command that reads
one: one line naming the file (and the field, where the file has one), exit 2. `accuracy` used to list each
run as skipped and exit 1; `plan` used to rule every candidate out and exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import _assert_one_line_error, run

REPORTS = Path(__file__).resolve().parents[1] / "data" / "reports"
DEPLOYMENT = REPORTS / "cpu-server.yaml"
VLLM = REPORTS / "vllm-bench-0.32.0" / "poisson-2rps-detailed.json"
CONCURRENCY = REPORTS / "vllm-bench-0.32.0" / "concurrency-4-summary.json"
GOOD = {"format": "ttftsim-deployment-calibration", "version": 1, "hardware": "CPU-host", "factors": {}}
WORKLOAD = (
    "workload: {type: synthetic, arrivals: {type: poisson, rate: 2}, num_requests: 20,\n"
    "  prompt_tokens: {type: fixed, value: 64}, output_tokens: {type: fixed, value: 8}}\n"
)
PLAN = """name: tiny
model: Llama-3.1-8B
engine: {{calibration: {calibration}}}
workload:
  type: synthetic
  arrivals: {{type: poisson, rate: 2}}
  prompt_tokens: {{type: fixed, value: 64}}
  output_tokens: {{type: fixed, value: 8}}
  num_requests: 100
slo: {{ttft_p99_s: 0.5}}
search: {{hardware: [H100-SXM5-80GB], tensor_parallel_size: [1]}}
probe_requests: 100
"""


def calibration(folder: Path, defect: str) -> tuple[Path, tuple[str, ...]]:
    """A calibration file with the defect, and what its error line must say besides the file's path."""
    path = folder / f"{defect}.json"
    if defect == "truncated":
        path.write_text(json.dumps(GOOD)[:40])
        return path, ("not valid JSON",)
    if defect == "wrong-type":
        path.write_text(json.dumps(GOOD | {"factors": {"gemm_efficiency_scale": "fast"}}))
        return path, ("factors.gemm_efficiency_scale", "expected a number")
    return path, ("engine.calibration: no calibration file",)  # missing (never written): the field naming it


def deployment(folder: Path, name: str, workload: bool = False) -> Path:
    """The CPU server's deployment naming the calibration file (relative to the deployment, as users write it)."""
    text = DEPLOYMENT.read_text().replace("cpu-server-model/config.json", str(REPORTS / "cpu-server-model/config.json"))
    path = folder / "deploy.yaml"
    path.write_text(text.replace("engine:\n", f"engine:\n  calibration: {name}\n", 1) + (WORKLOAD if workload else ""))
    return path


DEFECTS = ("truncated", "wrong-type", "missing")


@pytest.mark.parametrize("defect", DEFECTS)
def test_accuracy_refuses_a_bad_calibration_instead_of_skipping_the_run(tmp_path: Path, defect: str) -> None:
    path, needles = calibration(tmp_path, defect)
    result = run("accuracy", str(CONCURRENCY), "--deployment", str(deployment(tmp_path, path.name)))
    _assert_one_line_error(result, str(path), *needles)
    assert "skipped" not in result.stdout


@pytest.mark.parametrize("defect", DEFECTS)
def test_fit_refuses_a_bad_calibration(tmp_path: Path, defect: str) -> None:
    path, needles = calibration(tmp_path, defect)
    deploy = deployment(tmp_path, path.name)
    result = run("fit", str(VLLM), str(CONCURRENCY), "--deployment", str(deploy), "-o", str(tmp_path / "out.json"))
    _assert_one_line_error(result, str(path), *needles)


@pytest.mark.parametrize("defect", DEFECTS)
def test_simulate_refuses_a_bad_calibration(tmp_path: Path, defect: str) -> None:
    path, needles = calibration(tmp_path, defect)
    _assert_one_line_error(run("simulate", str(deployment(tmp_path, path.name, workload=True))), str(path), *needles)


@pytest.mark.parametrize("defect", DEFECTS)
def test_plan_refuses_a_bad_calibration_instead_of_ruling_out_every_candidate(tmp_path: Path, defect: str) -> None:
    path, needles = calibration(tmp_path, defect)
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.format(calibration=path.name))
    result = run("plan", str(plan), "--out", str(tmp_path / "out"))
    _assert_one_line_error(result, str(path), *needles)
    assert not (tmp_path / "out").exists()


def test_plan_still_rules_out_a_candidate_on_other_hardware_than_the_fit(tmp_path: Path) -> None:
    """The up-front read checks the file only: whether it fits a candidate's GPU stays the candidate's question."""
    (tmp_path / "cpu.json").write_text(json.dumps(GOOD))
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.format(calibration="cpu.json"))
    result = run("plan", str(plan), "--out", str(tmp_path / "out"))
    assert result.returncode == 1, result.stderr
    assert "fitted on CPU-host, the deployment runs on H100-SXM5-80GB" in result.stdout
