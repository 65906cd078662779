"""The search: bound every candidate, bisect capacities best-first in fixed waves (pruning candidates whose
optimistic cost cannot beat the best found), size replicas, confirm the cheapest with cluster runs. The
cheapest candidate of a GPU type that had every candidate pruned is still bisected, so that each type shows
its best cost and what binds it (plan/explain.py); each row ends with its answer in plain words.

Results depend only on the plan and its seed: tasks are pure functions of their inputs, waves have a
fixed size whatever the number of workers, and ties are broken by the candidate's key. So the local
process pool, Ray, one worker or many, fresh or resumed from the checkpoint give the same plan.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import fields
from typing import Any

from ttftsim.config.plan import Plan
from ttftsim.metrics.slo import SloFigures
from ttftsim.plan import evaluate
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.explain import missed, rate_unit, sentence
from ttftsim.plan.ranking import Row, cost_order, rank_order, tie_order
from ttftsim.plan.runner import Runner

WAVE = 8  # capacity bisections per pruning decision (fixed: the same result for any worker count)
PREDICT_TOP = 20
SHOW_TRIES = 3  # pruned candidates bisected per GPU type that has none sized, to show what it would cost


def candidates(plan: Plan) -> list[Candidate]:
    """The product of the search space's lists, in Candidate's field order (the last fields vary fastest); the
    pipeline stages are the plan engine's."""
    space = plan.search
    names = [item.name for item in fields(Candidate)]
    stages = [plan.engine.pipeline_parallel_size]
    values: list[list[Any]] = [stages if name == "pipeline_parallel_size" else getattr(space, name) for name in names]
    found = [Candidate(**dict(zip(names, combo, strict=True))) for combo in itertools.product(*values)]
    # vLLM uses expert parallelism only over more than one GPU (FusedMoEParallelConfig.make: use_ep needs
    # TP x DP > 1): on one it is the same deployment as without
    return [c for c in found if not (c.enable_expert_parallel and c.tensor_parallel_size * c.data_parallel_size == 1)]


def search(runner: Runner, output_tokens_per_s: float) -> list[Row]:
    """Every candidate ranked: bounded, bisected or pruned, sized, predicted, the cheapest confirmed; each priced
    at the traffic's `output_tokens_per_s`."""
    plan = runner.plan
    cands = candidates(plan)
    bounds = runner.run("bounds", [("bound", c, 0.0) for c in cands])
    rows: dict[str, Row] = {}
    feasible = []
    for cand, result in zip(cands, bounds, strict=True):
        if not result["feasible"]:
            rows[cand.key] = Row(cand, "infeasible", result["reason"])
            continue
        lower = evaluate.sizing(plan, cand, result["saturated_rate"])["cost_per_hour"]
        rows[cand.key] = Row(cand, "pending", saturated_rate=result["saturated_rate"], lower_bound_cost=lower)
        feasible.append(cand)
    feasible.sort(key=lambda c: (rows[c.key].lower_bound_cost, c.key))
    _capacities(runner, feasible, rows)
    shown = _best_of_pruned_types(runner, rows)
    sized = sorted((r for r in rows.values() if r.status == "estimate"), key=cost_order)
    _predict(runner, sized[:PREDICT_TOP] + shown, output_tokens_per_s)
    sized.sort(key=cost_order)  # equal costs: the lower predicted P99 first
    start = 0
    while start < min(len(sized), 3 * plan.confirm_top) and not any(r.status == "confirmed" for r in rows.values()):
        # the cheapest first, until one holds
        _confirm(runner, sized[start : start + plan.confirm_top], output_tokens_per_s)
        start += plan.confirm_top
    for row in sized[PREDICT_TOP:]:
        if row.status == "estimate" and math.isnan(row.ttft_p99_s):
            row.reason = f"sized from its capacity, not simulated at its size (only the {PREDICT_TOP} cheapest are)"
    for row in rows.values():
        unpriced = math.isnan(row.output_tokens_per_s) and not math.isnan(row.cost_per_hour)
        if unpriced and row.status != "infeasible":  # (one over max_replicas keeps its cost, but cannot serve)
            row.price(output_tokens_per_s)  # priced though never simulated at its size
        if not row.explanation:
            row.explanation = _unsimulated(row, plan)
    return sorted(rows.values(), key=rank_order)


def _unsimulated(row: Row, plan: Plan) -> str:
    """The sentence of a row never simulated at its size: its limit, or why it is out."""
    if row.cost_per_hour == row.cost_per_hour:
        return (
            sentence(row.head(), row.binding, row.max_rate, plan.slo, None, row.nearest, rate_unit(plan.workload))
            + f" ({row.status}: {row.reason})"
        )
    return f"{row.candidate.label()}: {row.status}: {row.reason}"


def _capacities(runner: Runner, ordered: list[Candidate], rows: dict[str, Row]) -> None:
    plan, best = runner.plan, math.inf
    for start in range(0, len(ordered), WAVE):
        wave = []
        for cand in ordered[start : start + WAVE]:
            row = rows[cand.key]
            if row.lower_bound_cost > best:
                row.status, row.reason = (
                    "pruned",
                    f"cannot beat ${best:,.2f}/h (at best ${row.lower_bound_cost:,.2f}/h)",
                )
            else:
                wave.append(cand)
        jobs = [("capacity", c, rows[c.key].saturated_rate) for c in wave]
        for cand, result in zip(wave, runner.run("capacity", jobs), strict=True):
            if _take_capacity(plan, rows[cand.key], result):
                rows[cand.key].status = "estimate"
                best = min(best, rows[cand.key].cost_per_hour)


def _take_capacity(plan: Plan, row: Row, result: dict[str, Any]) -> bool:
    """A capacity task's result on its row: the limit, and the sizing when it can serve the peak (True)."""
    row.binding, row.nearest = result.get("binding", ""), result.get("nearest", "")
    if not result["feasible"]:
        row.status, row.reason = "infeasible", result["reason"]
        row.low_load_miss = max(result["probes"][0]["ratios"].values(), default=math.nan)
        return False
    size = evaluate.sizing(plan, row.candidate, result["max_rate"])
    row.max_rate = result["max_rate"]
    row.needed, row.replicas, row.gpus = size["needed"], size["replicas"], size["gpus"]
    row.cost_per_hour, row.headroom = size["cost_per_hour"], size["headroom"]
    if size["replicas"] > plan.search.max_replicas:  # its cost stays: what the type would take
        row.status, row.reason = "infeasible", f"needs {size['replicas']} replicas > max_replicas"
        return False
    return True


def _best_of_pruned_types(runner: Runner, rows: dict[str, Row]) -> list[Row]:
    """For each GPU type with no candidate sized (all pruned or out), bisect its pruned candidates cheapest
    bound first, one per type per round, until one has a cost (at most SHOW_TRIES rounds): the rows that show
    what the type would cost and what binds it. They stay pruned."""
    waiting: dict[str, list[Row]] = {}
    for hardware in runner.plan.search.hardware:
        group = [r for r in rows.values() if r.candidate.hardware == hardware]
        if not any(r.status == "estimate" for r in group):
            pruned = sorted(
                (r for r in group if r.status == "pruned"), key=lambda r: (r.lower_bound_cost, tie_order(r))
            )
            waiting[hardware] = pruned[:SHOW_TRIES]
    shown: list[Row] = []
    for round_ in range(SHOW_TRIES):
        chosen = [queue[round_] for queue in waiting.values() if len(queue) > round_]
        jobs = [("capacity", r.candidate, r.saturated_rate) for r in chosen]
        for row, result in zip(chosen, runner.run("capacity", jobs), strict=True):
            reason = row.reason
            if _take_capacity(runner.plan, row, result):
                row.status, row.reason = "pruned", f"{reason}; costs ${row.cost_per_hour:,.2f}/h"
                shown.append(row)
            if row.cost_per_hour == row.cost_per_hour:
                waiting.pop(row.candidate.hardware)
    return shown


def _predict(runner: Runner, rows: list[Row], output_tokens_per_s: float) -> None:
    jobs = [("predict", r.candidate, float(r.replicas)) for r in rows]
    for row, result in zip(rows, runner.run("predict", jobs), strict=True):
        row.take_figures(runner.plan, SloFigures.from_dict(result), output_tokens_per_s)
        if row.status == "pruned":
            row.explanation += f" (pruned: {row.reason})"


def _confirm(runner: Runner, rows: list[Row], output_tokens_per_s: float) -> None:
    plan = runner.plan
    jobs = [("confirm", r.candidate, float(r.replicas)) for r in rows]
    for row, result in zip(rows, runner.run("confirm", jobs), strict=True):
        size_gpus = (result["replicas"] + row.candidate.warm_pool) * evaluate.replica_gpus(plan, row.candidate)
        row.replicas, row.gpus = result["replicas"], size_gpus
        row.cost_per_hour = size_gpus * evaluate.price_per_gpu_hour(plan, row.candidate.hardware)
        row.pods_lost = int(result.get("pods_lost", 0))
        row.requests_lost = int(result.get("requests_lost", 0))
        figures = SloFigures.from_dict(result)
        row.take_figures(plan, figures, output_tokens_per_s)
        if row.max_rate == row.max_rate:
            row.headroom = 1.0 - plan.target_rate / (row.replicas * row.max_rate)
        row.status = "confirmed" if result["met"] else "missed"
        if not result["met"]:
            why = "; ".join(filter(None, (missed(plan.slo, figures), result.get("refused", ""))))
            row.reason = f"cluster run misses with {result['replicas']} replicas: {why}"
