"""Order-statistic intervals of percentiles, read-outward intervals from reported percentiles, and the
standard-error interval of a mean: exact hand-computed cases, checked against scipy.stats.binom."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from ttftsim.metrics.intervals import (
    Interval,
    mean_interval,
    overlaps,
    point,
    rank_interval,
    reported_levels,
    reported_quantile_interval,
    sample_quantile_interval,
)

# The level -> value grid an inference-perf stage reports (min, p0.1 ... p99.9, max), in seconds.
GRID = {
    0.0: 0.010,
    0.001: 0.011,
    0.01: 0.012,
    0.05: 0.013,
    0.1: 0.014,
    0.25: 0.020,
    0.5: 0.025,
    0.75: 0.030,
    0.9: 0.035,
    0.95: 0.040,
    0.99: 0.050,
    0.999: 0.070,
    1.0: 0.100,
}


def _coverage(n: int, q: float, j: int, k: int) -> float:
    """P(j <= B < k), B ~ Binomial(n, q), from scipy."""
    return float(binom.cdf(k - 1, n, q) - binom.cdf(j - 1, n, q))


def test_median_of_ten_is_between_the_2nd_and_9th_values() -> None:
    # F(1) = 11/1024 <= 0.025 < F(2) = 56/1024; F(7) = 968/1024 < 0.975 <= F(8) = 1013/1024
    ranks = rank_interval(10, 0.5)
    assert (ranks.rank_lo, ranks.rank_hi) == (2, 9)
    assert ranks.coverage == pytest.approx((1013 - 11) / 1024, abs=1e-12)


def test_median_of_a_hundred_is_between_the_40th_and_61st_values() -> None:
    ranks = rank_interval(100, 0.5)
    assert (ranks.rank_lo, ranks.rank_hi) == (40, 61)
    assert binom.cdf(39, 100, 0.5) <= 0.025 < binom.cdf(40, 100, 0.5)
    assert binom.cdf(59, 100, 0.5) < 0.975 <= binom.cdf(60, 100, 0.5)
    assert ranks.coverage == pytest.approx(_coverage(100, 0.5, 40, 61), abs=1e-12)
    assert ranks.coverage == pytest.approx(0.9648, abs=1e-4)


def test_p90_and_p99_of_three_thousand() -> None:
    assert (rank_interval(3000, 0.9).rank_lo, rank_interval(3000, 0.9).rank_hi) == (2667, 2733)
    p99 = rank_interval(3000, 0.99)
    assert (p99.rank_lo, p99.rank_hi) == (2959, 2981)
    assert p99.coverage == pytest.approx(
        _coverage(3000, 0.99, 2959, 2981), abs=1e-9
    )  # log-gamma sums: ~1e-12 off scipy at n = 3000


def test_too_few_samples_clamp_to_the_extremes_and_report_the_coverage() -> None:
    # n = 5: F(0) = 1/32 > 0.025 and F(4) = 31/32 < 0.975, so no rank meets either tail: [min, max], 30/32
    ranks = rank_interval(5, 0.5)
    assert (ranks.rank_lo, ranks.rank_hi) == (1, 5)
    assert ranks.coverage == pytest.approx(30 / 32, abs=1e-12)
    # P99 of 100: P(B <= 99) = 1 - 0.99^100 = 0.634, so 95% is out of reach; equal lower tail, upper = max
    p99 = rank_interval(100, 0.99)
    assert (p99.rank_lo, p99.rank_hi) == (97, 100)
    assert p99.coverage == pytest.approx(_coverage(100, 0.99, 97, 100), abs=1e-12)
    assert p99.coverage < 0.95


def test_p99_of_three_hundred_widens_downward_to_keep_95_percent() -> None:
    # no upper rank <= 300 leaves 2.5% above (P(B = 300) = 0.99^300 = 4.9%); with the maximum as the upper
    # end, F(299) - 0.95 = 0.00096 is left for the lower tail: F(289) = 0.00026 <= it < F(290) = 0.00102
    ranks = rank_interval(300, 0.99)
    assert (ranks.rank_lo, ranks.rank_hi) == (290, 300)
    assert ranks.coverage == pytest.approx(1 - 0.99**300 - binom.cdf(289, 300, 0.99), abs=1e-12)
    assert ranks.coverage >= 0.95


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=2, max_value=5000), st.floats(min_value=0.01, max_value=0.99))
def test_equal_tailed_ranks_match_scipy_brute_force(n: int, q: float) -> None:
    cdf = binom.cdf(np.arange(n + 1), n, q)
    j, k = int((cdf <= 0.025).sum()), int(np.argmax(cdf >= 0.975)) + 1  # over every m in 0..n
    ranks = rank_interval(n, q)
    assert 1 <= ranks.rank_lo < ranks.rank_hi <= n
    assert ranks.coverage == pytest.approx(_coverage(n, q, ranks.rank_lo, ranks.rank_hi), abs=1e-9)
    if j >= 1 and k <= n:
        assert (ranks.rank_lo, ranks.rank_hi) == (j, k)
        assert ranks.coverage >= 0.95


def test_rank_interval_refuses_what_has_none() -> None:
    with pytest.raises(ValueError, match="num_samples >= 2"):
        rank_interval(1, 0.5)
    with pytest.raises(ValueError, match="0 < q"):
        rank_interval(10, 1.0)


def test_sample_interval_is_the_order_statistics() -> None:
    values = np.arange(1.0, 101.0)[::-1].copy()  # 100, 99, ..., 1: sorted inside
    interval = sample_quantile_interval(np.append(values, [np.nan, np.inf]), 0.5)  # non-finite left out
    assert (interval.lo, interval.hi) == (40.0, 61.0)
    assert interval.basis == "order statistics X(40)..X(61) of 100"
    assert sample_quantile_interval(np.array([1.0]), 0.5) == Interval(None, None, None, "1 samples: no interval")


def test_reported_levels_from_benchmark_keys() -> None:
    stats = {"mean": 9.0, "min": 1.0, "p0.1": 1.5, "p25": 2.0, "median": 3.0, "p99.9": 4.0, "max": 5.0, "n": 7}
    assert reported_levels(stats) == {0.0: 1.0, 0.001: 1.5, 0.25: 2.0, 0.5: 3.0, 0.999: 4.0, 1.0: 5.0}


def test_measured_interval_reads_the_reported_percentiles_outward() -> None:
    # P50 of 3000: ranks 1446..1555, levels 0.4818..0.5182 -> p25..p75
    p50 = reported_quantile_interval(GRID, 3000, 0.5)
    assert (p50.lo, p50.hi) == (0.020, 0.030)
    assert p50.basis.startswith("reported p25..p75 around ranks 1446..1555 of 3000")
    # P90: levels 0.8890..0.9110 -> p75..p95; P99: levels 0.9863..0.9937 -> p95..p99.9
    assert (reported_quantile_interval(GRID, 3000, 0.9).lo, reported_quantile_interval(GRID, 3000, 0.9).hi) == (
        0.030,
        0.040,
    )
    p99 = reported_quantile_interval(GRID, 3000, 0.99)
    assert (p99.lo, p99.hi) == (0.040, 0.070)
    # P99 of 300: ranks 290..300, levels 0.9666..1 -> p95..max
    small = reported_quantile_interval(GRID, 300, 0.99)
    assert (small.lo, small.hi) == (0.040, 0.100)


def test_a_side_with_no_reported_percentile_beyond_it_is_unbounded() -> None:
    interval = reported_quantile_interval({0.5: 0.025, 0.9: 0.035, 0.99: 0.05}, 100, 0.5)
    assert (interval.lo, interval.hi) == (None, 0.035)  # nothing reported at or below level 0.394


def test_mean_interval_is_plus_minus_1_96_standard_errors() -> None:
    interval = mean_interval(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    half = 1.959963984540054 * math.sqrt(2.5) / math.sqrt(5)  # s^2 = 2.5 (ddof 1)
    assert interval.lo == pytest.approx(3.0 - half, abs=1e-12)
    assert interval.hi == pytest.approx(3.0 + half, abs=1e-12)
    assert [interval.lo, interval.hi] == pytest.approx([1.6141, 4.3859], abs=1e-4)


def test_overlap() -> None:
    a = Interval(1.0, 2.0, 0.95, "")
    assert overlaps(a, Interval(2.0, 3.0, 0.95, ""))  # touching counts
    assert not overlaps(a, Interval(2.5, 3.0, 0.95, ""))
    assert overlaps(a, Interval(None, 0.5, None, "")) is False
    assert overlaps(a, Interval(None, 1.5, None, ""))
    assert overlaps(point(1.5, "mean"), a) and not overlaps(point(2.5, "mean"), a)
