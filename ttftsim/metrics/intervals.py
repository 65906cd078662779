"""Distribution-free confidence intervals for percentiles (order statistics) and means (standard error).

Percentile q of n samples X(1) <= ... <= X(n): the number B of samples at or below the true quantile
xi_q is Binomial(n, q), so P(X(j) <= xi_q < X(k)) = P(j <= B < k) = F(k-1) - F(j-1), F the binomial CDF.
The interval takes the largest j with F(j-1) <= alpha/2 and the smallest k with F(k-1) >= 1 - alpha/2
(equal tails, coverage >= 1 - alpha). No fitting, no assumption on the distribution beyond continuity.
When n is too small for that (a P99 of 300 samples has no k <= n), the ranks are clamped to 1..n and the
coverage actually reached is reported instead.

When only reported percentiles of a sample are known (a benchmark's p25, p50, ..., p99.9, min, max), rank r
is the quantile at level (r-1)/(n-1) (numpy's default, linear interpolation); the interval is read from the
nearest reported percentiles outward: the largest reported level at or below rank j's level, the smallest
at or above rank k's. That is conservative (wider) for linear and for inverted-CDF percentiles alike, and
unbounded (None) on a side where nothing is reported beyond the ranks.

Means: mean +/- z * s / sqrt(n) (normal approximation); it assumes independent samples, which consecutive
requests of one run are not quite, so it is narrower than the truth under queueing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

CONFIDENCE = 0.95
_LEVEL_TOLERANCE = 1e-9  # reported levels such as 0.99 against rank levels computed in floating point
_PERCENTILE_KEY = re.compile(r"p(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class RankInterval:
    """Order-statistic ranks (1-based) with P(X(rank_lo) <= xi_q < X(rank_hi)) = coverage.

    Invariant: 1 <= rank_lo < rank_hi <= num_samples when num_samples >= 2."""

    num_samples: int
    q: float
    rank_lo: int
    rank_hi: int
    coverage: float


@dataclass(frozen=True)
class Interval:
    """A confidence interval of one statistic; None on a side that is unbounded or unknown. basis says how
    it was obtained (ranks, reported percentiles, or standard error)."""

    lo: float | None
    hi: float | None
    coverage: float | None
    basis: str


@dataclass(frozen=True)
class _BinomialCdf:
    """F(m) = P(B <= m), B ~ Binomial(n, q), tabulated on m = first..first + len(cdf) - 1: +/- 10 standard
    deviations (plus a margin for small skewed cases) around nq, outside which F is within 1e-20 of 0 or 1."""

    n: int
    q: float
    first: int
    cdf: NDArray[np.float64]

    @classmethod
    def of(cls, n: int, q: float) -> _BinomialCdf:
        """Probabilities from log-gamma (no scipy: its import costs every run a tenth of a second), summed
        from the window's first rank, below which F is under 1e-20 (or exactly 0 when the window starts at 0)."""
        spread = 10.0 * math.sqrt(n * q * (1.0 - q)) + 10.0
        first, last = max(0, math.floor(n * q - spread)), min(n, math.ceil(n * q + spread))
        log_q, log_p = math.log(q), math.log1p(-q)
        base = math.lgamma(n + 1)
        pmf = [
            math.exp(base - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_q + (n - k) * log_p)
            for k in range(first, last + 1)
        ]
        cdf = np.minimum(np.fromiter(accumulate(pmf), dtype=np.float64, count=len(pmf)), 1.0)
        return cls(n, q, first, cdf)

    def at(self, m: int) -> float:
        if m < self.first:
            return 0.0
        index = m - self.first
        return float(self.cdf[index]) if index < len(self.cdf) else 1.0

    def largest_at_or_below(self, bound: float) -> int:
        """The largest m with F(m) <= bound; -1 when there is none."""
        return -1 if bound < 0 else self.first + int(np.searchsorted(self.cdf, bound, side="right")) - 1

    def smallest_at_or_above(self, bound: float) -> int:
        """The smallest m with F(m) >= bound; n + 1 when there is none."""
        return self.n + 1 if bound > 1 else self.first + int(np.searchsorted(self.cdf, bound, side="left"))


def rank_interval(num_samples: int, q: float, confidence: float = CONFIDENCE) -> RankInterval:
    """The equal-tailed order-statistic interval of the q-quantile from num_samples (>= 2) samples. Where one
    tail cannot be met inside ranks 1..n (a P99 of 300 samples has no upper rank), that rank is the sample's
    extreme and the other widens to keep the coverage where it can; coverage says what was reached."""
    n = num_samples
    if n < 2 or not 0.0 < q < 1.0 or not 0.0 < confidence < 1.0:
        raise ValueError(f"need num_samples >= 2 and 0 < q, confidence < 1 (got {n}, {q}, {confidence})")
    tail = (1.0 - confidence) / 2
    cdf = _BinomialCdf.of(n, q)
    rank_lo = cdf.largest_at_or_below(tail) + 1  # j - 1 = the largest m with F(m) <= alpha / 2
    rank_hi = cdf.smallest_at_or_above(1.0 - tail) + 1  # k - 1 = the smallest m with F(m) >= 1 - alpha / 2
    if rank_hi > n and cdf.at(n - 1) >= confidence:
        rank_lo = cdf.largest_at_or_below(cdf.at(n - 1) - confidence) + 1
    if rank_lo < 1 and cdf.at(0) + confidence <= cdf.at(n - 1):
        rank_hi = cdf.smallest_at_or_above(cdf.at(0) + confidence) + 1
    rank_lo = min(max(rank_lo, 1), n - 1)
    rank_hi = max(min(rank_hi, n), rank_lo + 1)
    return RankInterval(n, q, rank_lo, rank_hi, cdf.at(rank_hi - 1) - cdf.at(rank_lo - 1))


def sample_quantile_interval(values: NDArray[np.float64], q: float, confidence: float = CONFIDENCE) -> Interval:
    """The q-quantile's interval from the samples themselves (non-finite ones are left out)."""
    finite = np.sort(values[np.isfinite(values)])
    if len(finite) < 2:
        return Interval(None, None, None, f"{len(finite)} samples: no interval")
    ranks = rank_interval(len(finite), q, confidence)
    return Interval(
        float(finite[ranks.rank_lo - 1]),
        float(finite[ranks.rank_hi - 1]),
        ranks.coverage,
        f"order statistics X({ranks.rank_lo})..X({ranks.rank_hi}) of {ranks.num_samples}",
    )


def reported_levels(stats: Mapping[str, object]) -> dict[float, float]:
    """Quantile level -> value from a benchmark's percentile keys: min, max, median, p0.1 ... p99.9
    (other keys, such as mean, are left out)."""
    named = {"min": 0.0, "median": 0.5, "max": 1.0}
    levels: dict[float, float] = {}
    for key, value in stats.items():
        match = _PERCENTILE_KEY.fullmatch(key)
        level = named.get(key, round(float(match.group(1)) / 100, 12) if match else None)
        if level is not None and isinstance(value, int | float) and 0.0 <= level <= 1.0:
            levels[level] = float(value)
    return levels


def _label(level: float) -> str:
    return {0.0: "min", 1.0: "max"}.get(level, f"p{level * 100:g}")


def reported_quantile_interval(
    levels: Mapping[float, float], num_samples: int, q: float, confidence: float = CONFIDENCE
) -> Interval:
    """The q-quantile's interval when only reported percentiles (level -> value) of num_samples samples are
    known: the rank interval, widened outward to the nearest reported levels."""
    if num_samples < 2:
        return Interval(None, None, None, f"{num_samples} samples: no interval")
    ranks = rank_interval(num_samples, q, confidence)
    lo_level = (ranks.rank_lo - 1) / (num_samples - 1)
    hi_level = (ranks.rank_hi - 1) / (num_samples - 1)
    below = [level for level in levels if level <= lo_level + _LEVEL_TOLERANCE]
    above = [level for level in levels if level >= hi_level - _LEVEL_TOLERANCE]
    lo = max(below) if below else None
    hi = min(above) if above else None
    return Interval(
        None if lo is None else levels[lo],
        None if hi is None else levels[hi],
        ranks.coverage,
        f"reported {_label(lo) if lo is not None else '-'}..{_label(hi) if hi is not None else '-'} "
        f"around ranks {ranks.rank_lo}..{ranks.rank_hi} of {num_samples} (levels {lo_level:.4f}..{hi_level:.4f})",
    )


def mean_interval(values: NDArray[np.float64], confidence: float = CONFIDENCE) -> Interval:
    """mean +/- z * standard error of the finite values (normal approximation, independent samples)."""
    finite = values[np.isfinite(values)]
    if len(finite) < 2:
        return Interval(None, None, None, f"{len(finite)} samples: no interval")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * float(finite.std(ddof=1)) / math.sqrt(len(finite))
    mean = float(finite.mean())
    return Interval(mean - half, mean + half, confidence, f"mean +/- {z:.2f} standard errors, n={len(finite)}")


def overlaps(a: Interval, b: Interval) -> bool:
    """Whether two intervals share a point (None = unbounded on that side)."""
    a_lo, a_hi = (-math.inf if a.lo is None else a.lo), (math.inf if a.hi is None else a.hi)
    b_lo, b_hi = (-math.inf if b.lo is None else b.lo), (math.inf if b.hi is None else b.hi)
    return a_lo <= b_hi and b_lo <= a_hi


def point(value: float, basis: str) -> Interval:
    """A value with no interval of its own (a reported mean), as a zero-width interval."""
    return Interval(value, value, None, basis)
