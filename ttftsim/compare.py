"""`ttftsim compare A B`: the same traffic (A's workload and seed) through two scenarios; the differences
in TTFT percentiles, TPOT, throughput, cost and the TTFT breakdown.

$ per million output tokens is priced as `ttftsim plan` prices a deployment (metrics/token_price.py): the cost per
hour over the output tokens the traffic asks for, not over those a run generated; a note names a side that misses
its SLO, as the plan's table says `missed` beside its figure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttftsim.config.plan import RATE_ARRIVALS
from ttftsim.config.scenario import Scenario
from ttftsim.config.slo import Slo
from ttftsim.hardware.catalog import load_hardware
from ttftsim.metrics.run_summary import RunSummary
from ttftsim.metrics.token_price import cost_per_million_output_tokens, demand_output_tokens_per_s
from ttftsim.replica import resolve_ref
from ttftsim.simulate import load_scenario, simulate
from ttftsim.simulation_result import SimulationResult


@dataclass(frozen=True)
class Cost:
    """$/hour of what ran (the cluster's nodes, or the replica's GPUs), and $ per million output tokens at the
    traffic's demand (demand_output_tokens_per_s; None when it asks for none)."""

    per_hour_usd: float
    demand_output_tokens_per_s: float
    per_million_output_tokens_usd: float | None


Figure = Callable[[RunSummary, Cost], float | None]  # a row's number from A's or B's summary and cost
SLO_MET_ROW = "SLO met (1 yes, 0 no)"
ROWS: tuple[tuple[str, Figure, float], ...] = (
    ("requests finished", lambda s, c: s.requests.finished, 1.0),
    ("requests rejected", lambda s, c: s.requests.rejected, 1.0),
    ("TTFT mean (ms)", lambda s, c: s.ttft_s.mean, 1e3),
    ("TTFT P50 (ms)", lambda s, c: s.ttft_s.p50, 1e3),
    ("TTFT P90 (ms)", lambda s, c: s.ttft_s.p90, 1e3),
    ("TTFT P99 (ms)", lambda s, c: s.ttft_s.p99, 1e3),
    ("TTFT P99.9 (ms)", lambda s, c: s.ttft_s.p999, 1e3),
    ("TPOT P50 (ms)", lambda s, c: s.tpot_s.p50, 1e3),
    ("TPOT P99 (ms)", lambda s, c: s.tpot_s.p99, 1e3),
    ("throughput (req/s)", lambda s, c: s.throughput.requests_per_s, 1.0),
    ("output tokens/s", lambda s, c: s.throughput.output_tokens_per_s, 1.0),
    ("gateway: cold start, retries (mean ms)", lambda s, c: s.ttft_breakdown_mean_s.gateway_s, 1e3),
    ("queue (mean ms)", lambda s, c: s.ttft_breakdown_mean_s.queue_s, 1e3),
    ("recompute (mean ms)", lambda s, c: s.ttft_breakdown_mean_s.recompute_s, 1e3),
    ("prefill (mean ms)", lambda s, c: s.ttft_breakdown_mean_s.prefill_s, 1e3),
    ("waiting behind chunks (mean ms)", lambda s, c: s.ttft_breakdown_mean_s.waiting_s, 1e3),
    ("stream: API server (mean ms)", lambda s, c: s.ttft_breakdown_mean_s.stream_s, 1e3),
    ("frontend: HTTP, hand-offs (mean ms)", lambda s, c: s.ttft_breakdown_mean_s.frontend_s, 1e3),
    (SLO_MET_ROW, lambda s, c: None if s.slo is None else float(s.slo.met), 1.0),
    ("cost ($/hour)", lambda s, c: c.per_hour_usd, 1.0),
    ("cost ($/M output tokens)", lambda s, c: c.per_million_output_tokens_usd, 1.0),
    ("cold start median (s)", lambda s, c: s.cluster.cold_start_s.median if s.cluster else None, 1.0),
    ("SLO-violation minutes", lambda s, c: s.cluster.slo_violation_minutes if s.cluster else None, 1.0),
    ("alert pages", lambda s, c: _alerts(s, "pages"), 1.0),
    ("false pages", lambda s, c: _alerts(s, "false_pages"), 1.0),
    ("SLO minutes no page caught", lambda s, c: _alerts(s, "missed_slo_minutes"), 1.0),
)


def _alerts(summary: RunSummary, key: str) -> float | None:
    """A figure of the cluster's alert rules (None without rules)."""
    alerts = summary.cluster.alerts if summary.cluster is not None else None
    return None if alerts is None else alerts[key]


def cost(result: SimulationResult, base: Path, traffic_base: Path) -> Cost:
    """What the run cost (Cost); `traffic_base` is the folder of the traffic's file (A's: its length files)."""
    summary_span = max(result.sim_end_s, 1e-9)
    if result.cluster is not None:
        per_hour = result.cluster.cost["cost_usd"] / (summary_span / 3600)
    else:
        hardware = load_hardware(resolve_ref(result.scenario.hardware, base))
        per_hour = result.replica.engine.gpus * hardware.price_per_gpu_hour_usd
    demand = demand_of(result, traffic_base)
    per_million = cost_per_million_output_tokens(per_hour, demand)
    return Cost(per_hour, demand, per_million if per_million == per_million else None)


def demand_of(result: SimulationResult, traffic_base: Path) -> float:
    """Output tokens/s the run's traffic asks for. At a rate (poisson, constant, gamma, weibull arrivals) as a plan
    computes it: the rate times the output tokens asked for on average, from the workload's specification, the same
    for both sides whatever each served. Other traffic has no one rate (a trace, stages, a rate curve, closed-loop
    clients): the output tokens its requests asked for (served or not) over the span of their arrivals."""
    workload = result.scenario.workload
    arrivals = getattr(workload, "arrivals", None)
    if isinstance(arrivals, RATE_ARRIVALS):
        return demand_output_tokens_per_s(workload, arrivals.rate, traffic_base)
    arrival_s = result.requests["arrival_s"]
    span_s = float(arrival_s.max() - arrival_s.min()) if len(arrival_s) else 0.0
    return float(result.requests["output_tokens"].sum()) / span_s if span_s > 0 else 0.0


def priced_note(results: list[tuple[RunSummary, Cost]]) -> str | None:
    """What the $/M row means when a side misses its SLO, as the plan's table says `missed` beside a row priced at
    the demand: 'cost ($/M output tokens) is at the traffic's demand (1,594 output tokens/s), ...: B misses its SLO
    (generating 585 output tokens/s over its run), ...'; None when no side misses (or sets no SLO)."""
    missing = [
        (side, summary)
        for side, (summary, spent) in zip("AB", results, strict=True)
        if summary.slo is not None and not summary.slo.met and spent.per_million_output_tokens_usd is not None
    ]
    if not missing:
        return None
    demands = [spent.demand_output_tokens_per_s for _, spent in results]
    demand = (
        f"{demands[0]:,.0f}" if demands[0] == demands[1] else f"A {demands[0]:,.0f}, B {demands[1]:,.0f}"
    ) + " output tokens/s"
    who = " and ".join(side for side, _ in missing)
    generated = " and ".join(f"{summary.throughput.output_tokens_per_s:,.0f}" for _, summary in missing)
    one = len(missing) == 1
    return (
        f"cost ($/M output tokens) is at the traffic's demand ({demand}), as `ttftsim plan` prices a deployment, not "
        f"at what a run generated: {who} {'misses its' if one else 'miss their'} SLO (generating {generated} output "
        f"tokens/s over {'its run' if one else 'their runs'}), so {'its figure is' if one else 'their figures are'} "
        f"what that traffic's tokens cost on a deployment that does not serve them in time"
    )


TRAFFIC = ("workload", "seed", "horizon_s")  # A's, in both runs


def differences(a: Scenario, b: Scenario) -> list[str]:
    """What B deploys differently from A (model, hardware, engine, cluster, SLO), one `field: A -> B` each, in
    the schema's field order (unset: the version's default); the traffic fields are A's in both runs."""
    left = _flat(a.model_dump(mode="json", exclude={"name", *TRAFFIC}))
    right = _flat(b.model_dump(mode="json", exclude={"name", *TRAFFIC}))
    return changes(left, right)


def changes(left: dict[str, Any], right: dict[str, Any]) -> list[str]:
    """`path: A -> B` for each leaf (a dotted path, _flat) that differs, in order of appearance."""
    keys = list(dict.fromkeys([*left, *right]))
    # an empty mapping on one side whose fields the other side sets is said by those fields alone (only an empty
    # mapping: node labels hold dots, `nvidia.com/gpu` beside `nvidia.com/gpu.product` is two fields)
    empty = [key for key in keys if {} in (left.get(key), right.get(key))]
    filled = {key for key in empty if any(other.startswith(key + ".") for other in keys)}
    return [
        f"{key}: {_shown(left.get(key))} -> {_shown(right.get(key))}"
        for key in keys
        if left.get(key) != right.get(key) and key not in filled
    ]


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as dotted paths to its leaves (an empty mapping is a leaf)."""
    if not isinstance(value, dict) or not value:
        return {prefix: value}
    paths = (_flat(item, f"{prefix}.{key}" if prefix else str(key)) for key, item in value.items())
    return {path: leaf for flat in paths for path, leaf in flat.items()}


def _shown(value: Any) -> str:
    return "default" if value is None else str(value)


def compare(first: Path, second: Path, seed: int | None = None) -> dict[str, Any]:
    a, b_own = load_scenario(first), load_scenario(second)
    b = b_own.model_copy(update={name: getattr(a, name) for name in TRAFFIC})
    notes = []
    if any(getattr(b_own, name) != getattr(a, name) for name in TRAFFIC):
        notes.append(
            f"{second.name}'s own workload, seed or horizon is not used: both run {first.name}'s traffic "
            "(compare deploys two configurations under one traffic; simulate each file for its own)"
        )
    if b.slo == Slo() and a.slo != Slo():  # the same traffic's question: does B meet the SLO A asks for?
        b = b.model_copy(update={"slo": a.slo})
        notes.append(f"{second.name} sets no SLO: it is judged against {first.name}'s")
    results = []
    for scenario, path in ((a, first), (b, second)):
        result = simulate(scenario, path.parent, seed, source=str(path))
        results.append((result.summary(), cost(result, path.parent, first.parent)))
    priced = priced_note(results)
    if priced is not None:
        notes.append(priced)
    rows = []
    for label, figure, scale in ROWS:
        values = [figure(summary, spent) for summary, spent in results]
        va, vb = (None if v is None else v * scale for v in values)
        delta = None if va is None or vb is None else vb - va
        relative = None if delta is None or va is None or abs(va) < 1e-9 else delta / va
        rows.append({"metric": label, "a": va, "b": vb, "delta": delta, "relative": relative})
    return {
        "a": a.name,
        "b": b.name,
        "a_file": str(first),
        "b_file": str(second),
        "traffic": f"{first.name}'s workload, seed {seed if seed is not None else a.seed}",
        "differences": differences(a, b),
        "notes": notes,
        "rows": rows,
        "warnings": list(dict.fromkeys(w for summary, _ in results for w in summary.warnings or ())),  # not modelled
    }
