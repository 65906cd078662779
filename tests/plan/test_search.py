"""The search's table (plan/search.py) over a runner whose results are made up: which rows are simulated at their
size, and what a row sized but never simulated says and costs."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest

from ttftsim.config.plan import Plan
from ttftsim.metrics.slo import SloFigures
from ttftsim.plan import search as search_module
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.run import load_plan
from ttftsim.plan.search import search

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "plans" / "quickstart.yaml"
FIGURES = {f.name: 0.1 for f in fields(SloFigures) if f.name != "per_priority"}


@dataclass
class MadeUpRunner:
    """Every candidate feasible, each sustaining 2 req/s a replica within the SLO, every prediction and
    confirmation meeting it with a P99 TTFT of 0.1 s."""

    plan: Plan

    def run(self, phase: str, jobs: list[tuple[str, Candidate, float]]) -> list[Any]:
        made = {
            "bound": {"feasible": True, "saturated_rate": 4.0},
            "capacity": {"feasible": True, "max_rate": 2.0, "binding": "ttft_p99_s", "nearest": "", "probes": []},
            "predict": FIGURES,
        }
        return [made[kind] if kind != "confirm" else FIGURES | {"replicas": arg, "met": True} for kind, _, arg in jobs]


def test_a_row_sized_but_not_simulated_at_its_size_says_so_and_is_priced(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the PREDICT_TOP cheapest sized rows are simulated at their size; the others said `(estimate: )` with
    an empty reason and had no cost per million tokens, though their cost per hour is known."""
    monkeypatch.setattr(search_module, "PREDICT_TOP", 1)
    plan = load_plan(QUICKSTART)
    rows = search(MadeUpRunner(plan), output_tokens_per_s=1000.0)  # type: ignore[arg-type]
    unsimulated = [r for r in rows if r.status == "estimate" and r.ttft_p99_s != r.ttft_p99_s]
    assert unsimulated, [r.status for r in rows]
    for row in unsimulated:
        assert row.explanation.endswith(
            "(estimate: sized from its capacity, not simulated at its size (only the 1 cheapest are))"
        ), row.explanation
        assert row.cost_per_million_tokens == pytest.approx(row.cost_per_hour / 3.6)  # $/h over 3.6 M tokens/h
