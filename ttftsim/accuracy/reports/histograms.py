"""vLLM's Prometheus histograms as distributions: the buckets of one metric summed over its label sets
(engines, models, instances), their mean (sum / count, exact) and percentiles as Prometheus's
histogram_quantile computes them (linear within the bucket; the first bucket starts at 0; a quantile in the
+Inf bucket is the largest finite bound). A percentile read from buckets is only as fine as they are
(vLLM's TTFT buckets: ... 0.1, 0.25, 0.5, 0.75, 1 s ...).

Reported levels (for the measured 95% interval): each bucket bound at the share of requests at or below
it, read outward as for any reported percentiles (metrics/intervals.py); a bound is the value of a rank to
within one request."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ttftsim.errors import InputError

Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]  # metric name and its labels, sorted
_TOLERANCE = 1e-9  # of a count: rounding in sums of float samples, not a fall


@dataclass(frozen=True)
class Histogram:
    """One metric's buckets: cumulative counts at the finite upper bounds (increasing). Invariant: the
    cumulative counts never decrease and none exceeds count."""

    bounds: tuple[float, ...]
    cumulative: tuple[float, ...]
    count: float
    total: float
    repaired: bool = False  # a fall between bounds was levelled (a range query's series sampled apart)

    def mean(self) -> float:
        return self.total / self.count if self.count > 0 else math.nan

    def quantile(self, q: float) -> float:
        """histogram_quantile(q): the rank q x count located in its bucket, interpolated linearly."""
        if self.count <= 0:
            return math.nan
        rank = q * self.count
        lower_bound, lower_count = 0.0, 0.0
        for bound, cumulative in zip(self.bounds, self.cumulative, strict=True):
            if cumulative >= rank and cumulative > lower_count:
                return lower_bound + (bound - lower_bound) * (rank - lower_count) / (cumulative - lower_count)
            lower_bound, lower_count = bound, cumulative
        return lower_bound

    def levels(self) -> dict[float, float]:
        """Share of requests at or below each bound -> the bound (the smallest bound of a share)."""
        levels: dict[float, float] = {0.0: 0.0}
        if self.count <= 0:
            return {}
        for bound, cumulative in zip(self.bounds, self.cumulative, strict=True):
            levels.setdefault(cumulative / self.count, bound)
        return levels


def histogram(values: Mapping[SeriesKey, float], name: str, source: str, repair: bool = False) -> Histogram | None:
    """The histogram `name` (its _bucket, _count and _sum series) summed over label sets; None without
    buckets. Bucket bounds that do not parse as numbers are left out.

    A server writes cumulative bucket counts that never fall (prometheus_client sums its buckets as it writes
    them), and sums over label sets and differences of two snapshots of one server keep that: a fall in a
    snapshot is an edited or damaged file, an error naming the series (source), and so is a +Inf bucket below
    the last finite one. repair=True (a range query,
    whose series' increases come from points sampled apart) levels a fall as Prometheus's histogram_quantile
    does, and says so (repaired)."""
    buckets: dict[float, float] = {}
    count = total = 0.0
    found = False
    seen: set[str] = set()
    for (series, labels), value in values.items():
        if series == f"{name}_bucket":
            bound = _bound(dict(labels).get("le", ""))
            if bound is not None:
                buckets[bound] = buckets.get(bound, 0.0) + value
                found = True
        elif series == f"{name}_count":
            count += value
            seen.add("_count")
        elif series == f"{name}_sum":
            total += value
            seen.add("_sum")
    if not found:
        return None
    _check_complete(name, source, seen | ({'_bucket{le="+Inf"}'} if math.inf in buckets else set()))
    finite = sorted(b for b in buckets if math.isfinite(b))
    cumulative, repaired = _levelled([buckets[b] for b in finite], finite, name, source, repair)
    last = cumulative[-1] if cumulative else 0.0
    if math.inf in buckets and buckets[math.inf] < last - _TOLERANCE * max(1.0, last) and not repair:
        raise InputError(
            source, f"{name}_bucket", f"the +Inf bucket's count {buckets[math.inf]:g} is below the count "
            f"{last:g} at le={finite[-1]:g}: not what a server writes (an edited or damaged snapshot)",
        )  # fmt: skip
    count = max(count, buckets.get(math.inf, 0.0), last)
    return Histogram(tuple(finite), tuple(cumulative), count, total, repaired)


COMPLETE = ('_bucket{le="+Inf"}', "_count", "_sum")  # a histogram's series after its finite buckets, in order


def _check_complete(name: str, source: str, seen: set[str]) -> None:
    """A histogram with buckets has all of COMPLETE (prometheus_client writes each histogram's finite buckets, then
    these): one missing is a snapshot cut off or a query that left it out, and its mean or count would be read as 0
    (an error naming the first missing series)."""
    missing = [part for part in COMPLETE if part not in seen]
    if missing:
        raise InputError(
            source, f"{name}{missing[0]}", f"missing, though {name}'s buckets are there: a snapshot cut off or edited "
            "(a server writes every bucket, then +Inf, _count and _sum), or a query that left the series out",
        )  # fmt: skip


def _levelled(
    cumulative: list[float], bounds: list[float], name: str, source: str, repair: bool
) -> tuple[list[float], bool]:
    """The cumulative counts, each at least the one before, and whether any was raised (an error unless repair)."""
    repaired = False
    for i in range(1, len(cumulative)):
        if cumulative[i] < cumulative[i - 1] - _TOLERANCE * max(1.0, cumulative[i - 1]):
            if not repair:
                raise InputError(
                    source, f"{name}_bucket", f"the cumulative count falls from {cumulative[i - 1]:g} at "
                    f"le={bounds[i - 1]:g} to {cumulative[i]:g} at le={bounds[i]:g}: not what a server writes (an "
                    "edited or damaged snapshot)",
                )  # fmt: skip
            repaired = True
        cumulative[i] = max(cumulative[i], cumulative[i - 1])
    return cumulative, repaired


def _bound(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) or value < 0 else value
