"""Why a plan answers what it does: which SLO target binds a candidate's capacity, and the answer in plain
words ("8 x H100-SXM5-80GB TP2 ($48.00/h): mean TPOT is the limit, at 5.6 req/s per replica; P99 TTFT
544 ms of 1.5 s, mean TPOT 52 ms of 60 ms").

The binding target is read off the capacity bisection's probes: each probe simulates one replica at a rate
and records, for every target the SLO sets, its figure over its target (the ratio; above 1 is a miss). The
target that misses at the lowest probed rate is the one that binds (a tie at that rate: the one missed by
more). When no probe misses, the replica's saturated throughput is the limit ("throughput").
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from ttftsim.config.slo import Slo
from ttftsim.config.workload import ConversationWorkload, Workload
from ttftsim.metrics.slo import SloCheck, SloFigures, judge
from ttftsim.metrics.summary import reason_kinds

THROUGHPUT = "throughput"  # the binding "target" when no SLO target missed below saturation
WORDS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "end-to-end latency"}


def check_key(check: SloCheck) -> str:
    """A target's key in the plan's outputs: its SLO field, or per_priority.<k>.<field> for a class's."""
    return check.target if check.priority is None else f"per_priority.{check.priority}.{check.target}"


def words(key: str) -> str:
    """A target's key as a user says it: tpot_mean_s -> 'mean TPOT', per_priority.1.ttft_p99_s -> 'P99 TTFT
    of priority 1', goodput_share -> 'goodput'."""
    if key == THROUGHPUT:
        return "throughput (saturation)"
    who = ""
    if key.startswith("per_priority."):
        _, priority, key = key.split(".")
        who = f" of priority {priority}"
    if key == "goodput_share":
        return f"goodput{who}"
    metric, statistic = key.removesuffix("_s").split("_")
    level = "mean" if statistic == "mean" else statistic.upper()
    return f"{level} {WORDS[metric]}{who}"


def ratios(slo: Slo, figures: SloFigures) -> dict[str, float]:
    """Each target's figure over its target (above 1: missed), by key."""
    verdict = judge(slo, figures)
    return {} if verdict is None else {check_key(c): c.ratio for c in verdict.checks}


def binding(probes: list[dict[str, Any]]) -> str:
    """The target that misses at the lowest probed rate (ties: the larger miss); THROUGHPUT if none misses.
    Each probe is {"rate": requests/s, "ratios": {key: figure / target}}."""
    first_miss: dict[str, tuple[float, float]] = {}
    for probe in probes:
        for key, ratio in probe["ratios"].items():
            if ratio > 1.0 and (key not in first_miss or probe["rate"] < first_miss[key][0]):
                first_miss[key] = (probe["rate"], -ratio)
    if not first_miss:
        return THROUGHPUT
    return min(first_miss, key=lambda k: (first_miss[k], k))


def closest(probes: list[dict[str, Any]]) -> str:
    """The target nearest its limit at the highest rate that met them all ('' when none passed)."""
    passing = [p for p in probes if p["ratios"] and all(r <= 1.0 for r in p["ratios"].values())]
    if not passing:
        return ""
    top: dict[str, float] = max(passing, key=lambda p: p["rate"])["ratios"]
    return max(sorted(top), key=lambda k: top[k])


def missed(slo: Slo, figures: SloFigures) -> str:
    """The targets a run misses, each with its figure: 'mean TPOT 72 ms of 60 ms'."""
    verdict = judge(slo, figures)
    checks = [] if verdict is None else [c for c in verdict.checks if not c.is_met]
    return ", ".join(figure_text(c) for c in checks) or "nothing"


def refused(requests: pd.DataFrame) -> str:
    """Why a run's percentiles can be infinite: its requests refused, never served, counted by how they ended
    (rejected, failed), with the most frequent kind's first reason as the engine gave it ('115 of 600 requests
    rejected, never served: e.g. prompt 1012 + output 172 tokens exceed max_model_len 1024'); '' when none was."""
    refusals = requests[requests["status"].isin(("rejected", "failed"))]
    if not len(refusals):
        return ""
    kinds = reason_kinds(refusals["reason"])
    first = refusals.iloc[int(kinds.map(kinds.value_counts()).to_numpy().argmax())]  # the most frequent, first
    counts = refusals["status"].value_counts()
    ended = " and ".join(f"{counts[s]:,} {s}" for s in ("rejected", "failed") if s in counts)
    reason = first["reason"] if isinstance(first["reason"], str) and first["reason"] else "no reason recorded"
    return f"{ended} of {len(requests):,} requests, never served: e.g. {reason}"


def figure_text(check: SloCheck) -> str:
    """'P99 TTFT 346 ms of 1.5 s' (goodput: 'goodput 99.4% of 99%')."""
    name = words(check_key(check))
    if check.target == "goodput_share":
        got = "-" if check.figure_s is None or check.figure_s != check.figure_s else f"{check.figure_s:.1%}"
        return f"{name} {got} of {check.target_s:.1%}"
    return f"{name} {seconds(check.figure_s)} of {seconds(check.target_s)}"


def seconds(value: float | None) -> str:
    """346 ms, 1.5 s, inf (never served), - (nothing to judge)."""
    if value is None or value != value:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value * 1e3:,.0f} ms" if value < 1 else f"{value:,.3g} s"


def rate_unit(workload: Workload) -> str:
    """The unit of a plan's rates (its peak, each replica's limit): a conversation workload's arrivals start
    conversations, each several requests, so its rates are conversations per second."""
    return "conversations/s" if isinstance(workload, ConversationWorkload) else "req/s"


def sentence(
    head: str,
    bound: str,
    max_rate: float,
    slo: Slo,
    figures: SloFigures | None,
    nearest: str = "",
    unit: str = "req/s",
) -> str:
    """The answer for one candidate: '<head>: mean TPOT is the limit, at 5.6 req/s per replica; P99 TTFT
    544 ms of 1.5 s' (`unit`: the plan's rate_unit); when throughput is the limit, the target nearest its own
    (`nearest`) is named; without figures (not simulated at its size), only the limit."""
    text = f"{head}: {words(bound)} is the limit"
    if max_rate == max_rate:
        text += f", at {max_rate:,.2f} {unit} per replica"
    if bound == THROUGHPUT and nearest:
        text += f" (nearest target there: {words(nearest)})"
    if figures is None:
        return text
    verdict = judge(slo, figures)
    if verdict is None:
        return text
    return text + "; " + ", ".join(figure_text(c) for c in verdict.checks)


def wanted(slo: Slo) -> str:
    """The SLO as a user states it: 'P99 TTFT <= 1.5 s, mean TPOT <= 60 ms, goodput >= 99.0% (TTFT <= 500 ms,
    TPOT <= 30 ms each)', classes last ('P99 TTFT of priority 0 <= 200 ms')."""
    parts = [f"{words(k)} <= {seconds(v)}" for k, v in slo.statistic_targets().items()]
    if slo.goodput_share is not None:
        each = ", ".join(f"{WORDS[k.removesuffix('_s')]} <= {seconds(v)}" for k, v in slo.per_request_targets().items())
        parts.append(f"goodput >= {slo.goodput_share:.1%} ({each} each)")
    for priority, targets in sorted(slo.per_priority.items()):
        parts += [
            f"{words(f'per_priority.{priority}.{k}')} <= {seconds(v)}" for k, v in targets.statistic_targets().items()
        ]
        if targets.goodput_share is not None:
            parts.append(f"goodput of priority {priority} >= {targets.goodput_share:.1%}")
    return ", ".join(parts)
