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
from collections.abc import Callable
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
    """Samples with integer weights, ordered once for every percentile asked of them: a fleet's day has some
    77 million inter-token gaps. `percentile` is weighted_percentile, `slo_percentile` weighted_slo_percentile,
    to the last bit. Values must not be NaN (numpy would answer NaN; gaps never are).

    Two ways to find the value at a cumulative weight, the same answers. Many inter-token gaps (at least
    GROUPED_MIN_SIZE, values >= 0, weights 1 to GROUPED_MAX_WEIGHT: how many requests saw the gap) are
    sorted within each weight (one copy of the values, 8 bytes a sample): the weight of the samples at or
    below v is the sum over weights w of w times the count below v, and the value sought is found by
    bisecting the bit patterns of non-negative doubles, which order as the doubles do. Otherwise (fewer
    samples; zero weights, where numpy's rule for leading zeros is by position) one argsort and the
    cumulative weights in that order (16 bytes a sample, 20 while sorting)."""

    GROUPED_MAX_WEIGHT = 1 << 16
    GROUPED_MIN_SIZE = 1 << 22  # below this the argsort's 20 bytes a sample are little and its lookups quicker
    CHUNK = 1 << 20  # samples scattered into their weight's group at a time

    def __init__(self, values: NDArray[np.float64], weights: NDArray[Any]) -> None:
        self.values = values
        self.size = len(values)
        self.total = float(weights.sum()) if self.size else 0.0  # exact: integers below 2**53
        self.groups: list[tuple[int, NDArray[np.float64]]] | None = None
        self.order: NDArray[np.intp] | None = None
        self.cumulative: NDArray[np.float64] | None = None
        self.high_bits = 0  # grouped: the largest value's bit pattern
        grouped = self.size >= max(1, self.GROUPED_MIN_SIZE) and bool(
            weights.min() > 0 and weights.max() < self.GROUPED_MAX_WEIGHT and values.min() >= 0
        )
        if grouped:
            self.groups = _by_weight(values, weights, self.CHUNK)
            self.high_bits = _bits(max(float(group[-1]) for _, group in self.groups))
        else:
            self.order = np.argsort(values, kind="stable")
            cumulative = np.empty(self.size, dtype=np.float64)
            cumulative[:] = weights[self.order]
            # cumulative weights: exact integers as float64 (below 2**53), as numpy's weighted quantile sums them
            self.cumulative = np.cumsum(cumulative, out=cumulative)

    def _first(self, reached: Callable[[float], bool]) -> float:
        """The smallest value v whose cumulative weight c (the weights of the samples at or below it; with
        ties, a sorted position's running sum gives the same v) has reached(c); the largest if none has."""
        if self.groups is None:
            assert self.order is not None and self.cumulative is not None
            cumulative = self.cumulative
            first = bisect.bisect_left(range(self.size), True, key=lambda i: reached(float(cumulative[i])))
            return float(self.values[self.order[min(first, self.size - 1)]])
        groups = self.groups

        def weight_at_or_below(bits: int) -> float:
            v = _double(bits)
            return float(sum(w * int(np.searchsorted(group, v, side="right")) for w, group in groups))

        low, high = 0, self.high_bits
        first = bisect.bisect_left(range(low, high + 1), True, key=lambda bits: reached(weight_at_or_below(bits)))
        v = _double(min(low + first, high))
        # the sample itself (weight_at_or_below rises only at samples): the smallest one at or above v
        return min(float(group[i]) for _, group in groups if (i := int(np.searchsorted(group, v))) < len(group))

    def percentile(self, q: float) -> float:
        """Linear interpolation at position (N - 1) q of the N weighted samples (N > 0)."""
        total = self.total
        position = (total - 1) * q
        below = math.floor(position)
        # the 0-based sample k is the first value whose cumulative weight exceeds k
        lo = self._first(lambda c: c >= below + 1)
        hi = self._first(lambda c: c >= min(below + 2, total))
        share = position - below
        # numpy's own lerp, to the last bit: from the nearer end
        return float(hi - (hi - lo) * (1 - share) if share >= 0.5 else lo + (hi - lo) * share)

    def slo_percentile(self, q: float) -> float:
        """numpy's weighted inverted CDF (numpy.quantile(method="inverted_cdf", weights=...)): the first
        sorted value whose normalised cumulative weight fl(c / total) is >= q (a leading zero weight counts
        as -1), without the normalised array: fl(c / total) rises with c. inf when there is no weight."""
        total = self.total
        if self.size == 0 or total <= 0:
            return math.inf
        leading_zero = self.cumulative is not None and bool(self.cumulative[0] == 0)
        return self._first(lambda c: (c / total if c or not leading_zero else -1.0) >= q)


def _by_weight(values: NDArray[np.float64], weights: NDArray[Any], chunk: int) -> list[tuple[int, NDArray[np.float64]]]:
    """(weight, its samples' values sorted) for each weight present: the values scattered into one buffer, a
    chunk at a time (no whole-array temporaries beside it), each weight's part then sorted in place."""
    size = int(weights.max()) + 1
    counts = np.zeros(size, dtype=np.int64)
    for begin in range(0, len(values), chunk):
        counts += np.bincount(weights[begin : begin + chunk].astype(np.int64), minlength=size)
    starts = np.concatenate(([0], np.cumsum(counts)))
    fill = starts[:-1].copy()
    buffer = np.empty(len(values), dtype=np.float64)
    for begin in range(0, len(values), chunk):
        part = weights[begin : begin + chunk].astype(np.int64)
        order = np.argsort(part, kind="stable")
        by_weight, part_values = part[order], values[begin : begin + chunk][order]
        present = np.flatnonzero(np.bincount(by_weight))
        lefts = np.searchsorted(by_weight, present, side="left").tolist()
        rights = np.searchsorted(by_weight, present, side="right").tolist()
        for weight, left, right in zip(present.tolist(), lefts, rights, strict=True):
            at = int(fill[weight])
            buffer[at : at + right - left] = part_values[left:right]
            fill[weight] = at + right - left
    groups = []
    for weight in np.flatnonzero(counts).tolist():
        group = buffer[starts[weight] : starts[weight + 1]]
        group.sort()
        groups.append((weight, group))
    return groups


def _bits(value: float) -> int:
    """A non-negative double's bit pattern: ordered as the doubles are."""
    return int(np.float64(value).view(np.int64))


def _double(bits: int) -> float:
    return float(np.int64(bits).view(np.float64))


def slo_percentile(values: NDArray[np.float64], q: float) -> float:
    """The smallest value at least a share q of the values are at or below (+inf counts: an arrival never
    served); the figure an SLO percentile target is judged against. Values must not be empty."""
    return float(np.quantile(values, q, method="inverted_cdf"))


def weighted_slo_percentile(values: NDArray[np.float64], weights: NDArray[Any], q: float) -> float:
    """`slo_percentile` of the samples with each value repeated by its (integer) weight; inf when there are
    none (nothing to judge by is not a pass)."""
    return WeightedSamples(values, weights).slo_percentile(q)
