"""Summaries of a run: request counts, TTFT / TPOT / ITL / end-to-end percentiles, the TTFT breakdown,
throughput, goodput under the SLO, and prefix-cache hit rate. Each TTFT percentile also gets its 95%
order-statistic interval (ttft_interval_s; metrics/intervals.py): how far the percentile of this many
requests could move by sampling alone, not the model's error. The result is a typed RunSummary
(metrics/run_summary.py: its to_json() is summary.json); percentiles come from metrics/percentiles.py."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ttftsim.config.slo import Slo
from ttftsim.metrics.intervals import CONFIDENCE, rank_interval
from ttftsim.metrics.percentiles import LEVELS, WeightedSamples, percentile
from ttftsim.metrics.run_summary import (
    BREAKDOWN,
    Distribution,
    PrefixCache,
    QuantileInterval,
    QuantileIntervals,
    RequestCounts,
    RunSummary,
    Throughput,
    TtftBreakdown,
)
from ttftsim.metrics.slo import SloVerdict, good_requests, judge, slo_figures

__all__ = ["BREAKDOWN", "distribution", "quantile_intervals", "summarize", "weighted_distribution"]
NO_VALUES = Distribution(None, None, None, None, None)


def distribution(values: NDArray[np.float64]) -> Distribution:
    """Mean and percentiles (linear interpolation) of the finite values; None when there are none."""
    finite = values[np.isfinite(values)]
    if len(finite) == 0:
        return NO_VALUES
    return Distribution(float(finite.mean()), *(percentile(finite, q) for q in LEVELS.values()))


def quantile_intervals(values: NDArray[np.float64]) -> QuantileIntervals:
    """Each percentile's 95% order-statistic interval [X(rank_lo), X(rank_hi)] of the finite values, with the
    coverage the ranks reach (below 95% only where there are too few values, e.g. P99.9 of 1,000)."""
    ordered = np.sort(values[np.isfinite(values)])
    levels = {}
    for name, q in LEVELS.items():
        if len(ordered) < 2:
            levels[name] = QuantileInterval(None, None, None, None, None)
            continue
        ranks = rank_interval(len(ordered), q)
        lo, hi = float(ordered[ranks.rank_lo - 1]), float(ordered[ranks.rank_hi - 1])
        levels[name] = QuantileInterval(lo, hi, ranks.rank_lo, ranks.rank_hi, ranks.coverage)
    return QuantileIntervals(CONFIDENCE, len(ordered), **levels)


def weighted_distribution(values: NDArray[np.float64], weights: NDArray[Any]) -> Distribution:
    """Mean and percentiles of samples with integer weights: those of the samples written out one by one
    (sorted once for all the percentiles)."""
    if len(values) == 0 or weights.sum() == 0:
        return NO_VALUES
    mean = float(np.average(values, weights=weights))
    samples = WeightedSamples(values, weights)
    return Distribution(mean, *(samples.percentile(q) for q in LEVELS.values()))


def _counts(requests: pd.DataFrame) -> RequestCounts:
    status = requests["status"].value_counts()
    return RequestCounts(
        arrived=len(requests),
        finished=int(status.get("finished", 0)),
        rejected=int(status.get("rejected", 0)),
        in_flight=int(status.get("in_flight", 0)),
        aborted=int(status.get("aborted", 0)),
        failed=int(status.get("failed", 0)),
        preemptions=int(requests["num_preemptions"].sum()),
    )


def reason_kinds(reasons: pd.Series) -> pd.Series:
    """Each request's reason with its numbers as '#' ('prompt # + output # tokens exceed max_model_len #'): reasons
    alike but for their numbers are one kind (the summary's warnings and validate's finding on refused requests)."""
    return reasons.fillna("").astype(str).str.replace(r"\d[\d.,]*", "#", regex=True)


def summarize(
    requests: pd.DataFrame,
    itl: tuple[NDArray[np.float64], NDArray[Any]],
    slo: Slo,
    prefix: tuple[int, int],
    span_s: float,
) -> RunSummary:
    """The run's summary; the SLO verdict counts every arrival (one without a first token is late). Columns
    are read a mask at a time, not as row subsets of the frame (a day's requests frame is about a GB)."""
    finished = (requests["status"] == "finished").to_numpy()
    with_token = requests["ttft_s"].notna().to_numpy()
    num_finished, num_with_token = int(finished.sum()), int(with_token.sum())
    span = max(span_s, 1e-12)
    ttft_values = requests["ttft_s"].to_numpy(dtype=np.float64)
    breakdown = {c: float(requests[c][with_token].mean()) if num_with_token else None for c in BREAKDOWN}
    return RunSummary(
        requests=_counts(requests),
        ttft_s=distribution(ttft_values),
        ttft_interval_s=quantile_intervals(ttft_values),
        tpot_s=distribution(requests["tpot_s"].to_numpy(dtype=np.float64)[finished]),
        itl_s=weighted_distribution(*itl),
        e2e_s=distribution(requests["e2e_s"].to_numpy(dtype=np.float64)[finished]),
        ttft_breakdown_mean_s=TtftBreakdown(**breakdown),
        throughput=Throughput(
            span_s=span_s,
            requests_per_s=num_finished / span,
            output_tokens_per_s=float(requests["generated_tokens"].sum()) / span,
            prompt_tokens_per_s=float(requests["prompt_tokens"][finished].sum()) / span,
            goodput_requests_per_s=float(good_requests(requests, slo).sum()) / span
            if slo is not None and slo.per_request_targets()
            else None,
        ),
        prefix_cache=PrefixCache(prefix[0], prefix[1], prefix[1] / prefix[0] if prefix[0] else 0.0),
        slo=_verdict(requests, itl, slo),
    )


def _verdict(requests: pd.DataFrame, itl: tuple[NDArray[np.float64], NDArray[Any]], slo: Slo) -> SloVerdict | None:
    if not slo.is_judged():
        return None
    return judge(slo, slo_figures(requests, slo, itl) if len(requests) else None)
