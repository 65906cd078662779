"""`ttftsim compare A B`: the same traffic (A's workload and seed) through two scenarios; the differences
in TTFT percentiles, TPOT, throughput, cost and the TTFT breakdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ttftsim.hardware.catalog import load_hardware
from ttftsim.replica import resolve_ref
from ttftsim.simulate import SimulationResult, load_scenario, simulate

ROWS = (
    ("requests finished", ("requests", "finished"), 1.0),
    ("requests rejected", ("requests", "rejected"), 1.0),
    ("TTFT P50 (ms)", ("ttft_s", "p50"), 1e3),
    ("TTFT P90 (ms)", ("ttft_s", "p90"), 1e3),
    ("TTFT P99 (ms)", ("ttft_s", "p99"), 1e3),
    ("TTFT P99.9 (ms)", ("ttft_s", "p999"), 1e3),
    ("TPOT P50 (ms)", ("tpot_s", "p50"), 1e3),
    ("TPOT P99 (ms)", ("tpot_s", "p99"), 1e3),
    ("throughput (req/s)", ("throughput", "requests_per_s"), 1.0),
    ("output tokens/s", ("throughput", "output_tokens_per_s"), 1.0),
    ("gateway: cold start, retries (mean ms)", ("ttft_breakdown_mean_s", "gateway_s"), 1e3),
    ("queue (mean ms)", ("ttft_breakdown_mean_s", "queue_s"), 1e3),
    ("recompute (mean ms)", ("ttft_breakdown_mean_s", "recompute_s"), 1e3),
    ("prefill (mean ms)", ("ttft_breakdown_mean_s", "prefill_s"), 1e3),
    ("waiting behind chunks (mean ms)", ("ttft_breakdown_mean_s", "waiting_s"), 1e3),
    ("cost ($/hour)", ("cost", "per_hour_usd"), 1.0),
    ("cost ($/M output tokens)", ("cost", "per_million_output_tokens_usd"), 1.0),
)


def cost(result: SimulationResult, base: Path) -> dict[str, float | None]:
    """$/hour of what ran (the cluster's nodes, or the replica's GPUs) and $ per million output tokens."""
    summary_span = max(result.sim_end_s, 1e-9)
    if result.cluster is not None:
        per_hour = result.cluster.cost["cost_usd"] / (summary_span / 3600)
    else:
        hardware = load_hardware(resolve_ref(result.scenario.hardware, base))
        per_hour = result.replica.engine.tp * hardware.price_per_gpu_hour_usd
    tokens_per_hour = float(result.requests["generated_tokens"].sum()) / summary_span * 3600
    return {
        "per_hour_usd": per_hour,
        "per_million_output_tokens_usd": per_hour / tokens_per_hour * 1e6 if tokens_per_hour else None,
    }


def compare(first: Path, second: Path, seed: int | None = None) -> dict[str, Any]:
    a, b = load_scenario(first), load_scenario(second)
    b = b.model_copy(update={"workload": a.workload, "seed": a.seed, "horizon_s": a.horizon_s})
    results = []
    for scenario, path in ((a, first), (b, second)):
        result = simulate(scenario, path.parent, seed, source=str(path))
        summary = result.summary()
        summary["cost"] = cost(result, path.parent)
        results.append(summary)
    rows = []
    for label, (group, key), scale in ROWS:
        values = [r[group].get(key) for r in results]
        va, vb = (None if v is None else v * scale for v in values)
        delta = None if va is None or vb is None else vb - va
        relative = None if delta is None or va is None or abs(va) < 1e-9 else delta / va
        rows.append({"metric": label, "a": va, "b": vb, "delta": delta, "relative": relative})
    return {
        "a": a.name,
        "b": b.name,
        "traffic": f"{first.name}'s workload, seed {seed if seed is not None else a.seed}",
        "rows": rows,
        "warnings": list(dict.fromkeys(w for r in results for w in r["warnings"])),  # what A or B did not model
    }
