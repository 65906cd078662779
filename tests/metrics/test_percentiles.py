"""One percentile definition for reported figures (numpy's default, as the benchmark tools compute it), the
same for weighted samples, and the SLO percentile: at least a share q of the arrivals within x."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttftsim.metrics.percentiles import (
    WeightedSamples,
    percentile,
    slo_percentile,
    weighted_percentile,
    weighted_slo_percentile,
)

LEVELS = st.sampled_from([0.0, 0.5, 0.9, 0.99, 0.999, 1.0])
VALUES = st.lists(st.floats(0.0, 10.0, allow_nan=False), min_size=1, max_size=60)


def test_linear_interpolation_between_closest_ranks() -> None:
    values = np.array([4.0, 1.0, 3.0, 2.0])
    assert percentile(values, 0.5) == 2.5  # position (n - 1) q = 1.5: halfway between 2 and 3
    assert percentile(values, 0.9) == pytest.approx(3.7)
    assert percentile(values, 0.9) == np.percentile(values, 90)  # what vllm bench serve reports


@given(st.lists(st.tuples(st.floats(0.0, 10.0, allow_nan=False), st.integers(1, 5)), min_size=1, max_size=30), LEVELS)
def test_weighted_samples_give_the_percentile_of_the_samples_written_out(
    pairs: list[tuple[float, int]], q: float
) -> None:
    values = np.array([v for v, _ in pairs])
    weights = np.array([w for _, w in pairs], dtype=np.float64)
    written_out = np.repeat(values, [w for _, w in pairs])
    assert weighted_percentile(values, weights, q) == percentile(written_out, q)  # to the last bit


@given(VALUES, st.integers(0, 5), LEVELS.filter(lambda q: q > 0), st.floats(0.0, 10.0, allow_nan=False))
def test_slo_percentile_meets_x_iff_a_share_q_of_arrivals_is_within_x(
    served: list[float], unserved: int, q: float, x: float
) -> None:
    values = np.array(served + [np.inf] * unserved)
    assert (slo_percentile(values, q) <= x) == (np.mean(values <= x) >= q)


@given(
    st.lists(st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0, 0.1, 0.3]), st.integers(0, 7)), min_size=1, max_size=40),
    st.sampled_from([0.0, 1e-9, 0.1, 0.3, 1 / 3, 0.5, 0.9, 0.99, 0.999, 1.0]),
    st.sampled_from([np.uint32, np.float64]),
)
def test_weighted_slo_percentile_is_numpys_weighted_inverted_cdf(
    pairs: list[tuple[float, int]], q: float, dtype: type
) -> None:
    """Sorted once, no normalised array: still numpy.quantile(method="inverted_cdf", weights=...) to the last
    bit, with ties (few distinct values), zero weights (leading ones count as -1) and both weight dtypes."""
    values = np.array([v for v, _ in pairs])
    weights = np.array([w for _, w in pairs], dtype=dtype)
    if weights.sum() == 0:
        assert weighted_slo_percentile(values, weights, q) == np.inf
        return
    expected = float(np.quantile(values, q, method="inverted_cdf", weights=weights))
    assert weighted_slo_percentile(values, weights, q) == expected
    samples = WeightedSamples(values, weights)  # one sort serves every level, in any order
    assert [samples.slo_percentile(level) for level in (0.999, q, 0.5)] == [
        float(np.quantile(values, level, method="inverted_cdf", weights=weights)) for level in (0.999, q, 0.5)
    ]
    if (weights > 0).all():
        written_out = np.repeat(values, weights.astype(np.int64))
        assert samples.percentile(q) == percentile(written_out, q)
