"""A saved plan (plan.json) as a reader meets it, for the dashboard's plan page and `ttftsim report`: the
recommendation in plain words first, then each GPU type's best option (the ones out of the running greyed,
with the bound that put them out), then the candidates as table rows whose column names carry their units.

Read defensively: plan.json gains fields from version to version, so a field that is absent (a plan written
before it) is shown as "-" or left out, never an error; the shapes the views rely on are checked when the
plan is loaded (ttftsim/result_shapes.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

from ttftsim.plan.explain import words

IN_THE_RUNNING = ("confirmed", "estimate")  # a status outside these is out (missed, pruned, infeasible, pending)

# (id, header with its unit, the plan.json field, the scale from the stored unit to the shown one, decimals)
COLUMNS: tuple[tuple[str, str, str, float, int], ...] = (
    ("rank", "#", "", 1, 0),
    ("label", "candidate", "label", 1, 0),
    ("status", "status", "status", 1, 0),
    ("why_out", "why out", "reason", 1, 0),
    ("replicas", "replicas", "replicas", 1, 0),
    ("gpus", "GPUs", "gpus", 1, 0),
    ("cost_per_hour", "cost ($/h)", "cost_per_hour", 1, 2),
    ("cost_per_million_tokens", "cost ($/1M output tokens)", "cost_per_million_tokens", 1, 3),
    ("ttft_p50_ms", "P50 TTFT (ms)", "ttft_p50_s", 1e3, 1),
    ("ttft_p99_ms", "P99 TTFT (ms)", "ttft_p99_s", 1e3, 1),
    ("tpot_mean_ms", "mean TPOT (ms)", "tpot_mean_s", 1e3, 2),
    ("tpot_p99_ms", "P99 TPOT (ms)", "tpot_p99_s", 1e3, 2),
    ("binding", "limit (binding SLO)", "binding", 1, 0),
    ("max_rate", "limit at (req/s per replica)", "max_rate", 1, 2),
    ("headroom_pct", "headroom (%)", "headroom", 100, 1),
)


@dataclass(frozen=True)
class GpuBest:
    """A GPU type's best option in the plan, in words; is_out when even that one is out of the running."""

    hardware: str
    text: str
    is_out: bool


def recommendation(plan: dict[str, Any]) -> str:
    """The plan's answer in plain words: its recommendation line; for a plan without one (written before
    it, or with no candidate meeting the SLO), what it holds instead."""
    if plan.get("recommendation"):
        return str(plan["recommendation"])
    winner = plan.get("winner") or {}
    if winner:
        return str(winner.get("explanation") or f"recommended: {winner.get('label', '?')}")
    if plan.get("closest"):
        return f"No candidate meets the SLO. Closest: {plan['closest']}"
    return "No candidate meets the SLO."


def gpu_bests(plan: dict[str, Any]) -> list[GpuBest]:
    """Every GPU type the plan searched, in the ranking's order: its best row (plan.json's best_per_gpu, or
    the first of its rows in the ranking for a plan written before it), with that row's explanation."""
    ranked = [r for r in plan.get("ranked") or [] if isinstance(r, dict)]
    best = {str(k): v for k, v in (plan.get("best_per_gpu") or {}).items() if isinstance(v, dict)}
    for row in ranked:
        best.setdefault(hardware(row), row)
    order = list(dict.fromkeys([hardware(r) for r in ranked] + list(best)))
    return [GpuBest(hw, explanation(best[hw]), best[hw].get("status") not in IN_THE_RUNNING) for hw in order]


def hardware(row: dict[str, Any]) -> str:
    candidate = row.get("candidate")
    if isinstance(candidate, dict) and candidate.get("hardware"):
        return str(candidate["hardware"])
    return str(row.get("label", "?")).split(" ", 1)[0]  # labels open with the GPU's name


def explanation(row: dict[str, Any]) -> str:
    """A row's sentence (plan.json's explanation), or one built from its status and reason."""
    if row.get("explanation"):
        return str(row["explanation"])
    reason = f": {row['reason']}" if row.get("reason") else ""
    return f"{row.get('label', '?')}: {row.get('status', '?')}{reason}"


def table_rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The ranked candidates, one dict per row keyed by COLUMNS' ids, in the units of their headers; a field
    the plan lacks is None. A row out of the running gives its reason, and the cost it could at best reach."""
    rows = []
    for rank, row in enumerate((r for r in plan.get("ranked") or [] if isinstance(r, dict)), start=1):
        shown: dict[str, Any] = {"rank": rank}
        for column, _, field, scale, decimals in COLUMNS[1:]:
            value = row.get(field)
            shown[column] = round(value * scale, decimals) if _is_number(value) else value
            if decimals == 0 and _is_number(shown[column]):
                shown[column] = int(shown[column]) or None  # a candidate out before sizing has no replicas
        shown["binding"] = words(row["binding"]) if _known_target(row.get("binding")) else (row.get("binding") or None)
        bound = row.get("lower_bound_cost")
        if row.get("status") not in IN_THE_RUNNING and _is_number(bound) and "at best" not in str(row.get("reason")):
            shown["why_out"] = f"{row.get('reason') or row.get('status')} (at best ${bound:,.2f}/h)"
        rows.append(shown)
    return rows


def headers(plan: dict[str, Any] | None = None) -> list[dict[str, str]]:
    """COLUMNS as Dash DataTable columns (name, id); the limit's rate in the plan's unit (plan.json's rate_unit:
    conversations/s for a conversation workload; req/s for a plan written before the field)."""
    unit = str((plan or {}).get("rate_unit") or "req/s")
    return [{"name": name.replace("req/s", unit), "id": column} for column, name, *_ in COLUMNS]


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def _known_target(key: Any) -> bool:
    """A binding key that explain.words can say ('throughput', 'ttft_p99_s', 'per_priority.1.tpot_mean_s')."""
    if not isinstance(key, str) or not key:
        return False
    try:
        words(key)
    except (KeyError, ValueError):
        return False
    return True
