"""The plan's ranked table: one Row per candidate (its status, limit, size, cost and figures, and its answer
in plain words), the orders rows are ranked in, the Pareto front of cost and P99 TTFT, and each GPU type's
best row.

Rows are filled in by the search (plan/search.py); the words come from plan/explain.py. Nothing here runs
a simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ttftsim.config.plan import Plan
from ttftsim.metrics.slo import SloFigures, judge
from ttftsim.metrics.token_price import cost_per_million_output_tokens
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.explain import check_key, rate_unit, sentence


@dataclass
class Row:
    """One candidate in the ranked table."""

    candidate: Candidate
    status: str  # confirmed, missed, estimate, pruned, infeasible
    reason: str = ""
    saturated_rate: float = math.nan
    max_rate: float = math.nan  # the rate one replica sustains within the SLO (the plan's rate_unit)
    binding: str = ""  # the target that limits max_rate (plan/explain.py), or "throughput"
    nearest: str = ""  # with throughput the limit: the target nearest its own there
    low_load_miss: float = math.nan  # missed even at low load: the worst figure over its target there
    needed: int = 0  # replicas the peak needs, before the availability asked
    replicas: int = 0
    gpus: int = 0
    cost_per_hour: float = math.nan
    cost_per_million_tokens: float = math.nan
    headroom: float = math.nan
    ttft_p50_s: float = math.nan
    ttft_p99_s: float = math.nan
    tpot_mean_s: float = math.nan
    tpot_p99_s: float = math.nan
    output_tokens_per_s: float = math.nan  # of the whole deployment at the peak rate
    lower_bound_cost: float = math.nan
    pods_lost: int = 0  # in the confirming run (N+1 redundancy: one)
    requests_lost: int = 0  # the streams that pod was serving, failed: counted apart from the SLO (evaluate._judged)
    figures: dict[str, float] = field(default_factory=dict)  # each SLO target's figure, by key
    explanation: str = ""

    def head(self) -> str:
        """'8 x H100-SXM5-80GB TP2, least_outstanding ($48.00/h)'."""
        return f"{self.replicas} x {self.candidate.label()} (${self.cost_per_hour:,.2f}/h)"

    def take_figures(self, plan: Plan, figures: SloFigures, output_tokens_per_s: float) -> None:
        """The figures of a prediction or confirmation: the table's, each target's, the sentence; the cost per
        output token at the traffic's demand (`output_tokens_per_s` at the peak rate), the same for every row."""
        self.ttft_p50_s, self.ttft_p99_s = figures.ttft_p50_s, figures.ttft_p99_s
        self.tpot_mean_s, self.tpot_p99_s = figures.tpot_mean_s, figures.tpot_p99_s
        self.price(output_tokens_per_s)
        verdict = judge(plan.slo, figures)
        checks = () if verdict is None else verdict.checks
        self.figures = {check_key(c): math.nan if c.figure_s is None else c.figure_s for c in checks}
        unit = rate_unit(plan.workload)
        self.explanation = sentence(self.head(), self.binding, self.max_rate, plan.slo, figures, self.nearest, unit)

    def price(self, output_tokens_per_s: float) -> None:
        """The cost per million output tokens at the traffic's demand (`output_tokens_per_s` at the peak rate: what
        the deployment serves when it meets it), from the cost per hour: metrics/token_price.py, as compare prices."""
        self.output_tokens_per_s = output_tokens_per_s
        self.cost_per_million_tokens = cost_per_million_output_tokens(self.cost_per_hour, output_tokens_per_s)


STATUS_ORDER = {"confirmed": 0, "estimate": 1, "missed": 2, "pruned": 3, "infeasible": 4, "pending": 5}


def _known(value: float) -> float:
    return value if value == value else math.inf


def tie_order(row: Row) -> tuple[int, str]:
    """Between rows equal on everything measured: the candidate closest to vLLM's defaults (fewest engine arguments
    changed), then its key (deterministic)."""
    return (row.candidate.num_changed_arguments, row.candidate.key)


def cost_order(row: Row) -> tuple[float, float, tuple[int, str]]:
    return (row.cost_per_hour, _known(row.ttft_p99_s), tie_order(row))


def rank_order(row: Row) -> tuple[int, float, float, float, tuple[int, str]]:
    status = STATUS_ORDER[row.status]
    return (status, _known(row.cost_per_hour), _known(row.ttft_p99_s), _known(row.lower_bound_cost), tie_order(row))


def pareto(rows: list[Row]) -> list[Row]:
    """Rows no other row beats on both cost per hour and P99 TTFT (among those with both known)."""
    known = [r for r in rows if r.status in ("confirmed", "estimate") and r.ttft_p99_s == r.ttft_p99_s]
    known.sort(key=lambda r: (r.cost_per_hour, r.ttft_p99_s, tie_order(r)))
    front, best_p99 = [], math.inf
    for row in known:
        if row.ttft_p99_s < best_p99:
            front.append(row)
            best_p99 = row.ttft_p99_s
    return front


def best_per_gpu(rows: list[Row]) -> dict[str, Row]:
    """Each GPU type's best row: the cheapest whose cost is known (confirmed, sized, missed, pruned but
    bisected, or over max_replicas), in the ranking's order; else the one that missed by least at low load;
    else its best reason to be out."""

    def order(r: Row) -> tuple[bool, float, tuple[int, float, float, float, tuple[int, str]]]:
        return (r.cost_per_hour != r.cost_per_hour, _known(r.low_load_miss), rank_order(r))

    best: dict[str, Row] = {}
    for row in sorted(rows, key=order):
        best.setdefault(row.candidate.hardware, row)
    return best
