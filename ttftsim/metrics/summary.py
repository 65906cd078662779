"""Summaries of a run: request counts, TTFT / TPOT / ITL / end-to-end percentiles, the TTFT breakdown,
throughput, goodput under the SLO, and prefix-cache hit rate. Each TTFT percentile also gets its 95%
order-statistic interval (ttft_interval_s; metrics/intervals.py): how far the percentile of this many
requests could move by sampling alone, not the model's error."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ttftsim.config.scenario import Slo
from ttftsim.metrics.intervals import CONFIDENCE, rank_interval

QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
BREAKDOWN = ("gateway_s", "queue_s", "recompute_s", "prefill_s", "waiting_s", "stream_s", "frontend_s")


def distribution(values: NDArray[np.float64]) -> dict[str, float | None]:
    """Mean and percentiles (linear interpolation) of the finite values; None when there are none."""
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return {"mean": None, **dict.fromkeys(QUANTILES)}
    result: dict[str, float | None] = {"mean": float(finite.mean())}
    result.update({name: float(np.quantile(finite, q)) for name, q in QUANTILES.items()})
    return result


def quantile_intervals(values: NDArray[np.float64]) -> dict[str, Any]:
    """Each percentile's 95% order-statistic interval [X(rank_lo), X(rank_hi)] of the finite values, with the
    coverage the ranks reach (below 95% only where there are too few values, e.g. P99.9 of 1,000)."""
    ordered = np.sort(values[np.isfinite(values)])
    result: dict[str, Any] = {"confidence": CONFIDENCE, "num_samples": len(ordered)}
    for name, q in QUANTILES.items():
        if len(ordered) < 2:
            result[name] = {"lo": None, "hi": None, "rank_lo": None, "rank_hi": None, "coverage": None}
            continue
        ranks = rank_interval(len(ordered), q)
        result[name] = {
            "lo": float(ordered[ranks.rank_lo - 1]),
            "hi": float(ordered[ranks.rank_hi - 1]),
            "rank_lo": ranks.rank_lo,
            "rank_hi": ranks.rank_hi,
            "coverage": ranks.coverage,
        }
    return result


def weighted_distribution(values: NDArray[np.float64], weights: NDArray[np.float64]) -> dict[str, float | None]:
    """Percentiles of samples with integer weights (inverse of the weighted empirical CDF)."""
    if len(values) == 0 or weights.sum() == 0:
        return {"mean": None, **dict.fromkeys(QUANTILES)}
    order = np.argsort(values, kind="stable")
    sorted_values, cumulative = values[order], np.cumsum(weights[order])
    total = cumulative[-1]
    result: dict[str, float | None] = {"mean": float(np.average(values, weights=weights))}
    for name, q in QUANTILES.items():
        index = int(np.searchsorted(cumulative, q * total, side="left"))
        result[name] = float(sorted_values[min(index, len(sorted_values) - 1)])
    return result


def _meets_slo(requests: pd.DataFrame, slo: Slo) -> pd.Series:
    ok = requests["status"] == "finished"
    if slo.ttft_s is not None:
        ok &= requests["ttft_s"] <= slo.ttft_s
    if slo.tpot_s is not None:
        ok &= requests["tpot_s"].fillna(0.0) <= slo.tpot_s
    return ok


def summarize(
    requests: pd.DataFrame,
    itl: tuple[NDArray[np.float64], NDArray[np.float64]],
    slo: Slo,
    prefix: tuple[int, int],
    span_s: float,
) -> dict[str, Any]:
    """The run's summary as plain JSON-able values."""
    status = requests["status"].value_counts()
    finished = requests[requests["status"] == "finished"]
    with_token = requests[requests["ttft_s"].notna()]
    span = max(span_s, 1e-12)
    ttft_values = requests["ttft_s"].to_numpy(dtype=np.float64)
    ttft = distribution(ttft_values)
    summary: dict[str, Any] = {
        "requests": {
            "arrived": len(requests),
            "finished": int(status.get("finished", 0)),
            "rejected": int(status.get("rejected", 0)),
            "in_flight": int(status.get("in_flight", 0)),
            "aborted": int(status.get("aborted", 0)),
            "failed": int(status.get("failed", 0)),
            "preemptions": int(requests["num_preemptions"].sum()),
        },
        "ttft_s": ttft,
        "ttft_interval_s": quantile_intervals(ttft_values),
        "tpot_s": distribution(finished["tpot_s"].to_numpy(dtype=np.float64)),
        "itl_s": weighted_distribution(*itl),
        "e2e_s": distribution(finished["e2e_s"].to_numpy(dtype=np.float64)),
        "ttft_breakdown_mean_s": {c: float(with_token[c].mean()) if len(with_token) else None for c in BREAKDOWN},
        "throughput": {
            "span_s": span_s,
            "requests_per_s": len(finished) / span,
            "output_tokens_per_s": float(requests["generated_tokens"].sum()) / span,
            "prompt_tokens_per_s": float(finished["prompt_tokens"].sum()) / span,
            "goodput_requests_per_s": float(_meets_slo(requests, slo).sum()) / span,
        },
        "prefix_cache": {
            "query_tokens": prefix[0],
            "hit_tokens": prefix[1],
            "hit_rate": prefix[1] / prefix[0] if prefix[0] else 0.0,
        },
    }
    if slo.ttft_p99_s is not None:
        # every arrival counts: one that never got a first token (in flight, rejected, failed) is late
        everyone = requests["ttft_s"].fillna(np.inf).to_numpy(dtype=np.float64)
        p99_all = float(np.quantile(everyone, 0.99, method="inverted_cdf")) if len(everyone) else None
        summary["slo"] = {
            "ttft_p99_s": slo.ttft_p99_s,
            "p99_counting_unserved_s": p99_all if p99_all is None or np.isfinite(p99_all) else "inf",
            "met": p99_all is not None and p99_all <= slo.ttft_p99_s,
        }
    return summary
