"""Autoscaling over a day (issue #19 item 4): the winner's deployment under the plan's rate curve, once per
HPA setting (minReplicas x maxReplicas x target) and once as a fixed fleet sized for the curve's peak, each
a cluster simulation of the whole curve with node provisioning (Karpenter, a node of the replica's GPUs per
replica, so nodes are billed as the replicas need them). Each is reported as cost per day (the run's cost
scaled to 24 hours) and SLO-violation minutes per day (TTFT P99 windows, cluster/run.py); the recommended
setting is the cheapest within the plan's max_violation_minutes, against the fixed fleet's cost."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

from ttftsim.cluster.run import fixed_cluster
from ttftsim.config.plan import DaySearch, Plan
from ttftsim.plan import evaluate
from ttftsim.plan.evaluate import Candidate
from ttftsim.simulate import simulate

DAY_S = 86_400.0
FIXED = -1  # the option index of the fixed fleet


def options(day: DaySearch) -> list[dict[str, Any]]:
    """The HPA settings to try (min <= max), in a fixed order."""
    combos = itertools.product(sorted(set(day.min_replicas)), sorted(set(day.max_replicas)), sorted(set(day.targets)))
    return [{"min_replicas": lo, "max_replicas": hi, "target": t} for lo, hi, t in combos if lo <= hi]


def fixed_replicas(plan: Plan, cand: Candidate, max_rate: float) -> int:
    """Replicas of a fixed fleet for the curve's peak, sized as the plan sizes them."""
    assert plan.day is not None
    return evaluate.replica_count(plan, math.ceil(plan.day.peak_rate / (max_rate * (1 - plan.headroom))))


def day_scenario(plan: Plan, cand: Candidate, option: dict[str, Any] | None, fixed: int, base: str) -> Any:
    """The plan's traffic under the day's rate curve through the winner's deployment: autoscaled by the
    option's HPA, or (None) a fixed fleet of `fixed` replicas."""
    day = plan.day
    assert day is not None
    tp = evaluate.replica_gpus(plan, cand)  # a node per replica
    if option is None:
        cluster = fixed_cluster(cand.hardware, fixed, tp, cand.router, cand.warm_pool, gpus_per_node=tp)
    else:
        pool = {
            "name": "gpu",
            "hardware": cand.hardware,
            "gpus_per_node": tp,
            "initial_nodes": option["min_replicas"],
            "min_nodes": 0,
            "max_nodes": option["max_replicas"] + cand.warm_pool,
        }
        cluster = {
            "node_pools": [pool],
            "replicas": option["min_replicas"],
            "warm_pool": cand.warm_pool,
            "router": {"type": cand.router},
            "autoscaling": {
                "min_replicas": option["min_replicas"],
                "max_replicas": option["max_replicas"],
                "metrics": [{"name": day.metric, "target": option["target"]}],
            },
        }
    slo = plan.slo.model_dump(exclude_none=True)
    scenario = evaluate.scenario(plan, cand, day.peak_rate, 1, base, cluster=cluster, metrics_window_s=60.0, slo=slo)
    workload = scenario.workload.model_dump()
    workload.update(arrivals={"type": "rate_curve", "points": day.rate_curve}, num_requests=None, duration_s=day.span_s)
    return scenario.model_validate({**scenario.model_dump(exclude_unset=False), "workload": workload})


def run_day(plan: Plan, base: str, cand: Candidate, index: int, fixed: int) -> dict[str, Any]:
    """One option (index into options(); FIXED for the fixed fleet) over the curve: cost and SLO-violation
    minutes per day, the most replicas ready, the requests."""
    assert plan.day is not None
    option = None if index == FIXED else options(plan.day)[index]
    result = simulate(day_scenario(plan, cand, option, fixed, base), Path(base))
    summary = result.summary()
    cluster = summary.cluster
    assert cluster is not None
    scale = DAY_S / plan.day.span_s
    minutes = cluster.slo_violation_minutes
    return {
        "option": option,
        "fixed_replicas": fixed if option is None else None,
        "cost_per_day_usd": cluster.cost_usd * scale,
        "violation_minutes_per_day": None if minutes is None else minutes * scale,
        "max_ready_replicas": cluster.max_ready_replicas,
        "requests": summary.requests.arrived,
    }


def recommend(results: list[dict[str, Any]], day: DaySearch) -> dict[str, Any] | None:
    """The cheapest HPA setting within the violation budget (None when none is)."""
    allowed = [
        r
        for r in results
        if r["option"] is not None and (r["violation_minutes_per_day"] or 0.0) <= day.max_violation_minutes
    ]
    return min(allowed, key=lambda r: (r["cost_per_day_usd"], str(r["option"])), default=None)


def sentence(result: dict[str, Any] | None, fixed: dict[str, Any]) -> str:
    """'HPA 2-8 replicas on num_requests_waiting 5: $310/day, 0 SLO-violation minutes (fixed fleet of 8:
    $576/day, 0 minutes)'."""
    fleet = (
        f"fixed fleet of {fixed['fixed_replicas']}: ${fixed['cost_per_day_usd']:,.0f}/day, "
        f"{_minutes(fixed)} SLO-violation minutes"
    )
    if result is None:
        return f"no HPA setting stays within the SLO-violation budget ({fleet})"
    option = result["option"]
    return (
        f"HPA {option['min_replicas']}-{option['max_replicas']} replicas on target {option['target']:g}: "
        f"${result['cost_per_day_usd']:,.0f}/day, {_minutes(result)} SLO-violation minutes ({fleet})"
    )


def _minutes(result: dict[str, Any]) -> str:
    minutes = result["violation_minutes_per_day"]
    return "?" if minutes is None else f"{minutes:,.0f}"
