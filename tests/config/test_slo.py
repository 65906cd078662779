"""One SLO schema for scenario, plan and deployment files: the existing files load unchanged, a plan needs a
judged target and a deployment ttft_p99_s, both take per-request targets only inside a goodput target
(goodput_share), a scenario takes every target."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ttftsim.config.deploy import Deploy
from ttftsim.config.loading import parse_mapping
from ttftsim.config.plan import Plan
from ttftsim.config.scenario import Scenario
from ttftsim.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _with_slo(path: Path, slo: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data | {"slo": slo}


def test_a_scenario_takes_percentile_and_per_request_targets() -> None:
    slo = {"ttft_p99_s": 0.5, "ttft_p90_s": 0.3, "tpot_p99_s": 0.05, "e2e_p99_s": 20, "ttft_s": 1, "tpot_s": 0.1}
    scenario = parse_mapping(Scenario, _with_slo(EXAMPLES / "llama31-8b-h100.yaml", slo), "s.yaml")
    assert scenario.slo.percentile_targets() == {
        "ttft_p99_s": 0.5,
        "ttft_p90_s": 0.3,
        "tpot_p99_s": 0.05,
        "e2e_p99_s": 20,
    }


@pytest.mark.parametrize(("schema", "path"), [(Plan, "plans/quickstart.yaml"), (Deploy, "validate/deploy.yaml")])
@pytest.mark.parametrize(
    ("slo", "message"),
    [
        ({"ttft_p99_s": 0.5, "ttft_s": 1}, "ttft_s (1) are per-request targets; a"),
        ({"ttft_p99_s": 0.5, "ttft_p98_s": 1}, "unknown field"),
    ],
)
def test_plans_and_deployments_take_per_request_targets_only_in_a_goodput_target(
    schema: type[Plan | Deploy], path: str, slo: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match="slo") as raised:
        parse_mapping(schema, _with_slo(EXAMPLES / path, slo), path)
    assert message in str(raised.value.message)


def test_a_plan_takes_any_judged_target_and_a_deployment_needs_p99_ttft() -> None:
    plan = parse_mapping(Plan, _with_slo(EXAMPLES / "plans/quickstart.yaml", {"tpot_mean_s": 0.05}), "p.yaml")
    assert plan.slo.statistic_targets() == {"tpot_mean_s": 0.05}
    with pytest.raises(InputError, match="ttft_p99_s is required"):
        parse_mapping(Deploy, _with_slo(EXAMPLES / "validate/deploy.yaml", {"ttft_p90_s": 0.3}), "d.yaml")
    with pytest.raises(InputError, match="a plan needs a target to meet"):
        parse_mapping(Plan, _with_slo(EXAMPLES / "plans/quickstart.yaml", {}), "p.yaml")


def test_a_target_likely_meant_in_milliseconds_is_said() -> None:
    """A TTFT target of 500 is 500 s (every run meets it): warned at or above PLAUSIBLE_S, per class too."""
    from ttftsim.config.slo import Slo, unit_warnings

    slo = Slo.model_validate({"ttft_p99_s": 500, "tpot_mean_s": 0.05, "per_priority": {1: {"e2e_p99_s": 3600}}})
    assert unit_warnings(slo) == [
        "slo.ttft_p99_s is 500 s: targets are in seconds (500 ms would be 0.5); almost any run meets it",
        "slo.per_priority.1.e2e_p99_s is 3600 s: targets are in seconds (3600 ms would be 3.6); almost any run "
        "meets it",
    ]
    assert unit_warnings(Slo.model_validate({"ttft_p99_s": 59.9, "tpot_p99_s": 4.9, "e2e_p99_s": 3599})) == []
    assert unit_warnings(None) == []
