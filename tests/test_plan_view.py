"""A saved plan as the plan page and the report show it (ttftsim/plan_view.py): the recommendation first, every
GPU type's best with those out of the running flagged, table cells in their headers' units, and plans written
before a field existed shown with what they have."""

from __future__ import annotations

from typing import Any

from ttftsim import plan_view


def _row(hardware: str, status: str, **fields: Any) -> dict[str, Any]:
    return {"candidate": {"hardware": hardware}, "label": f"{hardware} TP1", "status": status, **fields}


WINNER = _row(
    "H100",
    "confirmed",
    replicas=4,
    gpus=4,
    cost_per_hour=12.0,
    cost_per_million_tokens=0.41666,
    output_tokens_per_s=8000.4,
    ttft_p50_s=0.0801,
    ttft_p99_s=0.34649,
    tpot_mean_s=0.052341,
    tpot_p99_s=0.0611,
    binding="tpot_mean_s",
    max_rate=5.6049,
    headroom=0.1234,
    explanation="4 x H100 TP1 ($12.00/h): mean TPOT is the limit, at 5.60 req/s per replica",
)
PRUNED = _row("L40S", "pruned", reason="cannot beat $12.00/h", lower_bound_cost=16.0, replicas=0, gpus=0)
PLAN = {
    "recommendation": "4 x H100 TP1 ($12.00/h): mean TPOT is the limit, at 5.60 req/s per replica",
    "ranked": [WINNER, PRUNED],
    "best_per_gpu": {"H100": WINNER, "L40S": PRUNED | {"explanation": "L40S TP1: pruned: cannot beat $12.00/h"}},
}


def test_the_recommendation_is_the_plans_sentence_or_what_it_holds_instead() -> None:
    assert plan_view.recommendation(PLAN) == PLAN["recommendation"]
    assert plan_view.recommendation({"winner": WINNER}) == WINNER["explanation"]  # before recommendation
    assert plan_view.recommendation({"winner": {"label": "H100 TP1"}}) == "recommended: H100 TP1"
    assert plan_view.recommendation({"closest": "L40S TP1 x 8"}) == "No candidate meets the SLO. Closest: L40S TP1 x 8"
    assert plan_view.recommendation({}) == "No candidate meets the SLO."


def test_every_gpu_type_is_listed_and_a_pruned_best_is_out() -> None:
    assert plan_view.gpu_bests(PLAN) == [
        plan_view.GpuBest("H100", WINNER["explanation"], is_out=False),
        plan_view.GpuBest("L40S", "L40S TP1: pruned: cannot beat $12.00/h", is_out=True),
    ]
    # a plan written before best_per_gpu: each type's first ranked row, in words built from status and reason
    older = {"ranked": [{k: v for k, v in WINNER.items() if k != "explanation"}, PRUNED]}
    assert plan_view.gpu_bests(older) == [
        plan_view.GpuBest("H100", "H100 TP1: confirmed", is_out=False),
        plan_view.GpuBest("L40S", "L40S TP1: pruned: cannot beat $12.00/h", is_out=True),
    ]


def test_table_cells_are_in_their_headers_units() -> None:
    winner, pruned = plan_view.table_rows(PLAN)
    assert winner == {
        "rank": 1,
        "label": "H100 TP1",
        "status": "confirmed",
        "why_out": None,
        "replicas": 4,
        "gpus": 4,
        "cost_per_hour": 12.0,
        "cost_per_million_tokens": 0.417,
        "ttft_p50_ms": 80.1,
        "ttft_p99_ms": 346.5,
        "tpot_mean_ms": 52.34,
        "tpot_p99_ms": 61.1,
        "binding": "mean TPOT",
        "max_rate": 5.6,
        "headroom_pct": 12.3,
    }
    assert pruned["why_out"] == "cannot beat $12.00/h (at best $16.00/h)"  # the bound that put it out
    assert pruned["replicas"] is None and pruned["ttft_p99_ms"] is None and pruned["rank"] == 2
    headers = {c["id"]: c["name"] for c in plan_view.headers()}
    assert headers["ttft_p99_ms"] == "P99 TTFT (ms)" and headers["cost_per_hour"] == "cost ($/h)"
    assert list(headers) == list(winner)


def test_a_binding_key_it_cannot_word_is_shown_as_written() -> None:
    rows = plan_view.table_rows({"ranked": [_row("H100", "estimate", binding="queue_depth")]})
    assert rows[0]["binding"] == "queue_depth"
    rows = plan_view.table_rows({"ranked": [_row("H100", "estimate", binding="throughput")]})
    assert rows[0]["binding"] == "throughput (saturation)"
