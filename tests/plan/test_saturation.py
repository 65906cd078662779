"""The flood's saturated throughput (plan/evaluate.py saturation, bound): counted while requests queued, by
hand; and a flood that fit in one batch grown until one queues (a new user's plan asked for two H100s where
one carries 15 req/s)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from ttftsim.plan.evaluate import Candidate, bound, saturation
from ttftsim.plan.run import load_plan

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "plans" / "quickstart.yaml"


def _flood(first_scheduled: list[float], finish: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"status": ["finished"] * len(finish), "first_scheduled_s": first_scheduled, "finish_s": finish}
    )


def test_the_rate_while_requests_queued() -> None:
    """40 requests: the first finishes at 2 s, the last is admitted at 12 s; 30 finish in (2, 12]: 3 req/s, above
    the flood's own 40 / 16 s = 2.5."""
    finish = [2.0] + [2.0 + (i + 1) / 3 for i in range(30)] + [14.0 + i / 4 for i in range(9)]
    admitted = [0.0] * 20 + [12.0 * (i + 1) / 20 for i in range(20)]
    rate, saturated = saturation(_flood(admitted, finish))
    assert saturated and rate == pytest.approx(30 / 10)


def test_a_flood_that_never_queued_is_not_saturated() -> None:
    """Every request admitted before the first finished: the flood's own rate (25 / 5 s), flagged."""
    finish = [4.0 + i / 25 for i in range(25)]
    assert saturation(_flood([0.0] * 25, finish)) == (pytest.approx(25 / finish[-1]), False)


def test_a_flood_smaller_than_a_batch_is_grown_until_it_queues(tmp_path: Path) -> None:
    """Llama-3.1-8B on one H100 (1024 sequences a batch): 200 requests fit in one batch (16.2 req/s, the latency
    of that batch); the bound floods 800 and measures the queued window, about 24 req/s."""
    plan = yaml.safe_load(QUICKSTART.read_text()) | {"probe_requests": 200}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(plan))
    cand = Candidate("H100-SXM5-80GB", 1, None, None, True, True, None, "auto", "least_outstanding", 0)
    result = bound(load_plan(path), str(tmp_path), cand)
    assert result["feasible"] and 22.0 < result["saturated_rate"] < 28.0


def test_a_long_plan_name_still_names_each_candidates_scenario(tmp_path: Path) -> None:
    """A plan's name may take most of the 200 characters a label has: its candidates' scenarios are cut to fit."""
    from ttftsim.plan.evaluate import scenario

    plan = yaml.safe_load(QUICKSTART.read_text()) | {"name": "n" * 190}
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(plan))
    cand = Candidate("H100-SXM5-80GB", 1, None, None, True, True, None, "auto", "least_outstanding", 0)
    assert len(scenario(load_plan(path), cand, 1.0, 10).name) == 200
