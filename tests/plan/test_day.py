"""Autoscaling over a day (plan/day.py): the HPA settings searched, the fixed fleet beside them, cost and
SLO-violation minutes per day, and the cheapest setting within the budget recommended."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from tests.test_cli import run
from ttftsim.config.plan import DaySearch, Plan
from ttftsim.plan.day import options, recommend, sentence

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "plans" / "quickstart.yaml"
SPIKE = {
    "rate_curve": [[0, 4], [1800, 4], [1860, 48], [1920, 4], [3600, 4]],
    "min_replicas": [1],
    "max_replicas": [3],
    "targets": [5],
    "max_violation_minutes": 2000,
}


def test_the_settings_are_every_min_max_target_with_min_at_most_max() -> None:
    day = DaySearch(rate_curve=[(0, 1), (10, 2)], min_replicas=[2, 1, 4], max_replicas=[3], targets=[5, 2])
    assert [(o["min_replicas"], o["max_replicas"], o["target"]) for o in options(day)] == [
        (1, 3, 2.0),
        (1, 3, 5.0),
        (2, 3, 2.0),
        (2, 3, 5.0),
    ]


def test_the_cheapest_setting_within_the_violation_budget_is_recommended() -> None:
    day = DaySearch(**{**SPIKE, "max_violation_minutes": 10})
    cheap_late = {"option": {"min_replicas": 1, "max_replicas": 2, "target": 5.0}, "cost_per_day_usd": 50.0,
                  "violation_minutes_per_day": 40.0}  # fmt: skip
    dear_ok = {"option": {"min_replicas": 2, "max_replicas": 4, "target": 5.0}, "cost_per_day_usd": 90.0,
               "violation_minutes_per_day": 5.0}  # fmt: skip
    fixed = {"option": None, "fixed_replicas": 4, "cost_per_day_usd": 288.0, "violation_minutes_per_day": 0.0}
    assert recommend([cheap_late, dear_ok], day) is dear_ok
    assert sentence(dear_ok, fixed) == (
        "HPA 2-4 replicas on target 5: $90/day, 5 SLO-violation minutes (fixed fleet of 4: $288/day, 0 "
        "SLO-violation minutes)"
    )
    assert recommend([cheap_late], day) is None


def test_a_day_with_a_trace_or_a_bad_curve_is_refused() -> None:
    plan = yaml.safe_load(QUICKSTART.read_text())
    with pytest.raises(ValidationError, match="rate_curve times start at 0 and increase"):
        Plan.model_validate({**plan, "day": {**SPIKE, "rate_curve": [[5, 1], [4, 2]]}})
    trace = {"type": "trace", "path": "t.csv", "format": "azure"}
    with pytest.raises(ValidationError, match="which a trace fixes"):
        Plan.model_validate({**plan, "workload": trace, "day": SPIKE})


def test_the_winner_over_a_spike_autoscales_cheaper_than_the_fixed_fleet(tmp_path: Path) -> None:
    plan = yaml.safe_load(QUICKSTART.read_text())
    plan["search"] = {"hardware": ["H100-SXM5-80GB"], "tensor_parallel_size": [1]}
    plan |= {"probe_requests": 300, "confirm_s": 60, "confirm_top": 1, "day": SPIKE}
    path = tmp_path / "day.yaml"
    path.write_text(yaml.safe_dump(plan))
    result = run("plan", str(path), "--out", str(tmp_path / "out"), "--json")
    assert result.returncode == 0, result.stderr
    day = json.loads(result.stdout)["day"]
    (hpa,), fixed = day["options"], day["fixed"]
    assert fixed["fixed_replicas"] >= 2 and fixed["max_ready_replicas"] == fixed["fixed_replicas"]
    assert fixed["violation_minutes_per_day"] == 0.0
    assert fixed["cost_per_day_usd"] >= 72.0 * fixed["fixed_replicas"]  # $3/GPU-hour, a day, at least
    assert hpa["max_ready_replicas"] > 1  # the spike scaled it out
    assert hpa["cost_per_day_usd"] < fixed["cost_per_day_usd"]
    assert day["best"] == hpa and day["recommendation"].startswith("HPA 1-3 replicas on target 5: $")
