"""One percentile definition for reported figures (numpy's default, as the benchmark tools compute it), the
same for weighted samples, and the SLO percentile: at least a share q of the arrivals within x."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ttftsim.metrics.percentiles import percentile, slo_percentile, weighted_percentile

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
