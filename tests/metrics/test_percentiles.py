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


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_gaps_sorted_within_their_weight_give_numpys_answers(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inter-token gaps (values >= 0, weights >= 1) take the grouped way: each weight's values sorted, the
    value at a cumulative weight found by bisecting the doubles' bit patterns; scattered into their groups a
    chunk at a time (3: across chunk edges). Same answers as numpy, ties, zeros and a huge gap included."""
    monkeypatch.setattr(WeightedSamples, "CHUNK", chunk)
    monkeypatch.setattr(WeightedSamples, "GROUPED_MIN_SIZE", 1)  # a day's gaps take it; these 1,001 too
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.choice([0.0, 0.007, 0.0071, 0.012], 300), rng.exponential(0.01, 700), [1e300]])
    weights = rng.integers(1, 40, len(values)).astype(np.uint32)
    samples = WeightedSamples(values, weights)
    assert samples.groups is not None and samples.order is None  # the grouped way
    written_out = np.repeat(values, weights.astype(np.int64))
    for q in (0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0):
        assert samples.slo_percentile(q) == float(np.quantile(values, q, method="inverted_cdf", weights=weights))
        assert samples.percentile(q) == percentile(written_out, q)
    with_zero = WeightedSamples(values, np.where(np.arange(len(values)) % 5 == 0, 0, weights))
    assert with_zero.groups is None  # zero weights: the argsort way (numpy's leading-zero rule is by position)
