"""Percentiles, computed in this one place for the whole package.

Reported percentiles (the summary's TTFT / TPOT / ITL / end-to-end distributions, the time series, the
figures, the accuracy harness) use numpy's default: linear interpolation between the two closest ranks
(Hyndman and Fan's type 7), at position (n - 1) q of the sorted values. That is what `vllm bench serve`,
inference-perf and aiperf report (numpy.percentile with its default method), so a simulated P99 and a
benchmark's P99 are the same statistic. Samples with integer weights (a run of identical inter-token gaps
recorded once) get exactly the percentile of the samples written out one by one.

SLO verdicts are the one other definition, on purpose: `slo_percentile` is the smallest value that at least
a share q of the samples are at or below (the inverted empirical CDF, numpy's method="inverted_cdf").
An SLO "P99 TTFT <= x over every arrival" means "at least 99% of arrivals got their first token within
x", and that holds exactly when slo_percentile(ttft, 0.99) <= x; an arrival never served is +inf, which
interpolation would smear into a neighbour (or into NaN: inf x 0). The plan, `validate` and the summary's
verdict use it; nothing else does. `weighted_slo_percentile` is the same rule for samples with integer
weights (the run's inter-token gaps, each run of equal gaps recorded once): numpy's own inverted CDF with
weights, equal to slo_percentile of the samples written out one by one.
"""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

LEVELS = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}  # the summary's percentiles, by JSON key


def percentile(values: NDArray[np.float64], q: float) -> float:
    """The q-quantile (0 <= q <= 1) by linear interpolation, as the benchmark tools report it; values must
    be finite and not empty."""
    return float(np.quantile(values, q))


def weighted_percentile(values: NDArray[np.float64], weights: NDArray[Any], q: float) -> float:
    """`percentile` of the samples with each value repeated by its (integer) weight, without writing them
    out: the two order statistics around position (N - 1) q of the N weighted samples, interpolated."""
    return WeightedSamples(values, weights).percentile(q)


class WeightedSamples:
    """Samples with integer weights, sorted once for every percentile asked of them: a fleet's day has some
    50 million inter-token gaps, and each sort of them takes about a gigabyte of temporaries. `percentile`
    is weighted_percentile, `slo_percentile` weighted_slo_percentile, to the last bit. Values must not be
    NaN (numpy would answer NaN; gaps never are)."""

    def __init__(self, values: NDArray[np.float64], weights: NDArray[Any]) -> None:
        # 16 bytes a sample kept (the order, the cumulative weights), 20 while sorting; the sorted values are
        # read through the order where a percentile needs one
        self.values = values
        self.order = np.argsort(values, kind="stable")
        cumulative = np.empty(len(values), dtype=np.float64)
        cumulative[:] = weights[self.order]
        # cumulative weights: exact integers as float64 (below 2**53), as numpy's weighted quantile sums them
        self.cumulative = np.cumsum(cumulative, out=cumulative)
        self.total = float(self.cumulative[-1]) if len(self.cumulative) else 0.0

    def _ordered(self, index: int) -> float:
        """The index-th smallest value."""
        return float(self.values[self.order[index]])

    def percentile(self, q: float) -> float:
        """Linear interpolation at position (N - 1) q of the N weighted samples (N > 0)."""
        cumulative, total = self.cumulative, self.total
        position = (total - 1) * q
        below = math.floor(position)
        # the 0-based sample k is the first value whose cumulative weight exceeds k
        lo = self._ordered(int(np.searchsorted(cumulative, below + 1, side="left")))
        hi = self._ordered(int(np.searchsorted(cumulative, min(below + 2, total), side="left")))
        share = position - below
        # numpy's own lerp, to the last bit: from the nearer end
        return float(hi - (hi - lo) * (1 - share) if share >= 0.5 else lo + (hi - lo) * share)

    def slo_percentile(self, q: float) -> float:
        """numpy's weighted inverted CDF (numpy.quantile(method="inverted_cdf", weights=...)): the first
        sorted value whose normalised cumulative weight fl(c_i / total) is >= q (a leading zero weight
        counts as -1), without the normalised array: fl(c / total) rises with c, so a binary search over that
        same test finds it. inf when there is no weight."""
        cumulative, total = self.cumulative, self.total
        if len(cumulative) == 0 or total <= 0:
            return math.inf
        leading_zero = bool(cumulative[0] == 0)

        def reached(i: int) -> bool:
            c = float(cumulative[i])
            return (c / total if c or not leading_zero else -1.0) >= q

        first = bisect.bisect_left(range(len(cumulative)), True, key=reached)
        return float(self._ordered(min(first, len(cumulative) - 1)))


def slo_percentile(values: NDArray[np.float64], q: float) -> float:
    """The smallest value at least a share q of the values are at or below (+inf counts: an arrival never
    served); the figure an SLO percentile target is judged against. Values must not be empty."""
    return float(np.quantile(values, q, method="inverted_cdf"))


def weighted_slo_percentile(values: NDArray[np.float64], weights: NDArray[Any], q: float) -> float:
    """`slo_percentile` of the samples with each value repeated by its (integer) weight; inf when there are
    none (nothing to judge by is not a pass)."""
    if len(values) == 0 or float(weights.sum()) <= 0:
        return math.inf
    return WeightedSamples(values, weights).slo_percentile(q)
