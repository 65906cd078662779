"""A plan's workload length (num_requests, duration_s) is replaced by the plan's own (probe_requests, confirm_s):
the plan says so among its warnings, with what replaces it (cold trial D4: it was silently ignored)."""

from __future__ import annotations

from pathlib import Path

import yaml

from ttftsim.config.plan import Plan
from ttftsim.plan.run import check_plan, load_plan, replaced_length

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "plans" / "quickstart.yaml"


def _plan_file(tmp_path: Path, **workload: object) -> Path:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["workload"].pop("num_requests", None)
    data["workload"].update(workload)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_plan_says_its_workloads_length_is_replaced_and_by_what(tmp_path: Path) -> None:
    path = _plan_file(tmp_path, num_requests=50000)  # 20 req/s, probe_requests 600, confirm_s 120
    assert check_plan(load_plan(path), path)[-1] == (
        "workload.num_requests (50000) is replaced in a plan: each single-replica run sends probe_requests (600 "
        "requests), the confirming cluster run lasts confirm_s (120 s) at the peak rate (2,400 requests)"
    )
    path = _plan_file(tmp_path, num_requests=100, duration_s=5)
    assert check_plan(load_plan(path), path)[-1].startswith(
        "workload.num_requests (100) and duration_s (5) are replaced in a plan: "
    )


def test_a_conversation_plan_counts_conversations(tmp_path: Path) -> None:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["workload"] = {
        "type": "conversation",
        "arrivals": {"type": "poisson", "rate": 3},
        "turns": {"type": "uniform", "low": 2, "high": 8},
        "user_tokens": {"type": "fixed", "value": 100},
        "output_tokens": {"type": "fixed", "value": 100},
        "duration_s": 30,
    }
    path = tmp_path / "sessions.yaml"
    path.write_text(yaml.safe_dump(data))
    assert check_plan(load_plan(path), path)[-1] == (
        "workload.duration_s (30) is replaced in a plan: each single-replica run sends probe_requests (600 "
        "conversations), the confirming cluster run lasts confirm_s (120 s) at the peak rate (600 conversations)"
    )


def test_a_plan_may_leave_the_workloads_length_out() -> None:
    """Every run of a plan sets its own length: without num_requests or duration_s the workload is probe_requests
    long (as a probe runs it) and nothing is said; a trace's length still chooses its window."""
    data = yaml.safe_load(QUICKSTART.read_text())
    data["workload"].pop("num_requests", None)
    plan = Plan.model_validate(data | {"probe_requests": 700})
    assert plan.workload.num_requests == 700 and replaced_length(plan) == []


def test_a_probe_requests_written_as_a_float_is_the_length_left_out() -> None:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["workload"].pop("num_requests", None)
    plan = Plan.model_validate(data | {"probe_requests": 700.0})
    assert plan.workload.num_requests == 700 and replaced_length(plan) == []
