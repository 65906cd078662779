"""The search's table (plan/search.py) over a runner whose results are made up: which rows are simulated at their
size, and what a row sized but never simulated says and costs."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from ttftsim import plan_view
from ttftsim.config.plan import Plan
from ttftsim.metrics.slo import SloFigures
from ttftsim.plan import evaluate
from ttftsim.plan import search as search_module
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.run import PlanResult, load_plan
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
        return [
            made[kind] if kind != "confirm" else FIGURES | {"replicas": int(arg), "met": True} for kind, _, arg in jobs
        ]


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


def test_a_tie_goes_to_the_candidate_closest_to_vllms_defaults() -> None:
    """Candidates equal on every figure: the one with chunked prefill and prefix caching on (vLLM's defaults) ranks
    and wins first, then the ones with one argument changed, the one with both off last. It was the candidate key's
    order (False before True), so the winner turned both off and its `vllm serve` line said so (cold trial D3)."""
    plan = load_plan(QUICKSTART)
    space = {
        "hardware": ["H100-SXM5-80GB"],
        "tensor_parallel_size": [1],
        "max_num_seqs": [None],
        "enable_chunked_prefill": [False, True],
        "enable_prefix_caching": [False, True],
    }
    plan = plan.model_copy(update={"search": plan.search.model_copy(update=space)})
    rows = search(MadeUpRunner(plan), output_tokens_per_s=1000.0)  # type: ignore[arg-type]
    order = [(r.status, r.candidate.enable_chunked_prefill, r.candidate.enable_prefix_caching) for r in rows]
    assert order == [
        ("confirmed", True, True),
        ("confirmed", False, True),
        ("estimate", True, False),
        ("estimate", False, False),
    ]


CONVERSATIONS = """name: chat-sessions
model: Llama-3.1-8B
engine: {max_model_len: 16384}
workload:
  type: conversation
  arrivals: {type: poisson, rate: 3}
  turns: {type: uniform, low: 2, high: 8}
  system_prompt_tokens: 500
  user_tokens: {type: lognormal, mean: 150, std: 150, high: 2000}
  output_tokens: {type: lognormal, mean: 200, std: 200, high: 1000}
  num_requests: 200
slo: {ttft_p99_s: 1.0}
search:
  hardware: [H100-SXM5-80GB]
"""


def test_a_conversation_plans_rates_are_said_in_conversations_per_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversation workload's arrivals start conversations (2-8 requests each): its peak and each replica's
    limit are conversations/s, which the plan said as 'req/s' (cold trial D2). The sentence, the low-load miss,
    plan.json's rate_unit and the plan view's column say the unit; a request workload's stay req/s."""
    path = tmp_path / "sessions.yaml"
    path.write_text(CONVERSATIONS)
    plan = load_plan(path)
    (row,) = search(MadeUpRunner(plan), output_tokens_per_s=1000.0)  # type: ignore[arg-type]
    assert row.explanation.startswith(
        "2 x H100-SXM5-80GB TP1, least_outstanding ($6.00/h): P99 TTFT is the limit, "
        "at 2.00 conversations/s per replica;"
    ), row.explanation
    result = PlanResult(plan, [row], [row], row, 0, 0, 1000.0)
    assert (result.as_json()["target_rate"], result.as_json()["rate_unit"]) == (3.0, "conversations/s")
    limit = {h["id"]: h["name"] for h in plan_view.headers(result.as_json())}["max_rate"]
    assert limit == "limit at (conversations/s per replica)"
    assert {h["id"]: h["name"] for h in plan_view.headers({})}["max_rate"] == "limit at (req/s per replica)"
    late = SloFigures(**FIGURES | {"ttft_p99_s": 2.0, "per_priority": {}})
    served = SimpleNamespace(requests=pd.DataFrame({"status": ["finished"], "reason": [""]}))
    monkeypatch.setattr(evaluate, "simulate", lambda *args: served)
    monkeypatch.setattr(evaluate, "_figures", lambda *args: late)
    reason = evaluate.capacity(plan, str(tmp_path), row.candidate, saturated=4.0)["reason"]
    assert reason == "misses the SLO even at low load (0.20 conversations/s): P99 TTFT 2 s of 1 s"
    requests = load_plan(QUICKSTART)
    assert PlanResult(requests, [], [], None, 0, 0, 1.0).as_json()["rate_unit"] == "req/s"
    assert evaluate.capacity(requests, str(tmp_path), row.candidate, saturated=4.0)["reason"].startswith(
        "misses the SLO even at low load (0.20 req/s): "
    )
