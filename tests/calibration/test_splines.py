"""The spline correction: recovers a known smooth residual, clamps outside its knots, survives JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttftsim.calibration import curves, splines
from ttftsim.calibration.splines import Axis, Correction, fit_correction


def _grid() -> np.ndarray:
    a, b, c = np.meshgrid(np.arange(0.0, 13.0), np.arange(5.0, 15.0), [7.0, 8.0])
    return np.column_stack([a.ravel(), b.ravel(), c.ravel()])


def _truth(x: np.ndarray) -> np.ndarray:
    return 0.3 * np.sin(x[:, 0] / 3.0) * np.cos(x[:, 1] / 4.0) + 0.1 * (x[:, 2] - 7.0)


def test_correction_recovers_a_smooth_residual_on_held_out_points() -> None:
    x = _grid()
    held = np.arange(len(x)) % 5 == 4
    correction = fit_correction(x[~held], _truth(x[~held]), ((0, 1, 2),), max_knots=8, damping=1e-4)
    assert np.max(np.abs(correction(x[held]) - _truth(x[held]))) < 0.01
    axes = correction.terms[0].axes
    assert [a.degree for a in axes] == [3, 3, 1]  # two distinct values: a linear axis
    assert correction.terms[0].size == 10 * 10 * 2


def test_a_region_never_measured_is_pulled_toward_the_curve() -> None:
    """Coefficients no measured point touches stay at zero (the curve alone), not extrapolated."""
    x = _grid()
    seen = ~((x[:, 0] > 8) & (x[:, 1] > 10))
    correction = fit_correction(x[seen], np.full(seen.sum(), 0.2), ((0, 1),), max_knots=13, damping=0.01)
    assert correction(np.array([[2.0, 6.0, 7.0]]))[0] == pytest.approx(0.2, abs=0.01)
    assert abs(correction(np.array([[12.0, 14.0, 7.0]]))[0]) < 0.05


def test_features_outside_the_knots_hold_the_boundary_value() -> None:
    x = _grid()
    correction = fit_correction(x, _truth(x), ((0, 1, 2),), max_knots=8, damping=1e-4)
    inside = np.array([[12.0, 14.0, 8.0]])
    outside = np.array([[40.0, 99.0, 9.0]])
    assert correction(outside)[0] == pytest.approx(correction(inside)[0])


def test_json_round_trip_keeps_the_values() -> None:
    x = _grid()
    correction = fit_correction(x, _truth(x), ((0, 1), (1, 2)), max_knots=8, damping=1e-3)
    again = Correction.from_json(json.loads(json.dumps(correction.to_json())))
    assert np.allclose(again(x), correction(x), atol=1e-5)


def test_a_single_value_axis_is_a_constant() -> None:
    axis = Axis.from_values(np.array([7.0, 7.0]), 8)
    assert axis.degree == -1 and axis.size == 1
    index, value = axis.nonzero(np.array([3.0, 9.0]))
    assert index.tolist() == [[0], [0]] and value.tolist() == [[1.0], [1.0]]


def test_allreduce_switches_regime_at_the_custom_allreduce_limit() -> None:
    """Below vLLM's 8 MiB custom all-reduce limit one latency/bandwidth pair, from it on NCCL's."""
    params = np.array([5e-6, 1e11, 30e-6, 2e11])
    limit = curves.CUSTOM_ALLREDUCE_MAX_BYTES
    below, at = curves.allreduce(params, np.array([2.0, 2.0]), np.array([limit - 1.0, float(limit)]))
    assert below == pytest.approx(5e-6 + (limit - 1) / 1e11)
    assert at == pytest.approx(30e-6 + limit / 2e11)


def test_correction_features_are_log2_products_and_ratios() -> None:
    columns = {
        "isl": np.array([1024.0]),
        "batch": np.array([8.0]),
        "heads": np.array([32.0]),
        "kv_heads": np.array([8.0]),
        "head_dim": np.array([128.0]),
    }
    assert curves.correction_features("prefill_attention", columns).tolist() == [[10.0, 8.0, 2.0, 7.0]]
    assert curves.correction_features("decode_attention", columns).tolist() == [[10.0, 3.0, 10.0, 2.0, 7.0]]


def test_basis_matches_scipy_design_matrix() -> None:
    from scipy.interpolate import BSpline

    axis = Axis.from_values(np.array([0.0, 1.0, 2.5, 4.0, 7.0, 9.0]), 8)
    x = np.linspace(0.0, 9.0, 37)
    index, values = axis.nonzero(x)
    dense = np.zeros((len(x), axis.size))
    np.put_along_axis(dense, index, values, axis=1)
    expected = BSpline.design_matrix(x, np.asarray(axis.knots), axis.degree).toarray()
    assert np.allclose(dense, expected)
    assert np.allclose(dense.sum(axis=1), 1.0)  # partition of unity


def test_tables_match_the_correction_between_grid_points() -> None:
    """What the simulator reads (1-D and 2-D tables, linear interpolation) is the spline to 1e-3."""
    x = _grid()
    correction = fit_correction(x, _truth(x), ((0, 1), (1, 2), (2,)), max_knots=8, damping=1e-3)
    point = np.array([3.3, 9.7, 7.0])
    line = correction.tabulate((1,), point)
    values = np.array([5.0, 6.21, 11.13, 14.0])
    full = np.exp(correction(np.column_stack([np.full(4, 3.3), values, np.full(4, 7.0)])))
    assert np.allclose(line.along(values), full, rtol=1e-3)
    assert [line.at(v) for v in values] == pytest.approx(full, rel=1e-3)
    assert line.at(-50.0) == pytest.approx(line.at(5.0)) and line.at(99.0) == pytest.approx(line.at(14.0))
    plane = correction.tabulate((0, 1), point)
    assert plane.at2(4.37, 12.6) == pytest.approx(float(np.exp(correction(np.array([[4.37, 12.6, 7.0]])))[0]), rel=1e-3)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 9),
    st.integers(2, 9),
    st.floats(-3.0, 3.0),
    st.floats(-3.0, 3.0),
    st.floats(-1.0, 3.0),
    st.floats(-1.0, 3.0),
    st.integers(0, 2**32 - 1),
)
def test_a_2d_tables_point_equals_its_column_at_that_point_to_the_bit(
    rows: int, cols: int, low_x: float, low_y: float, dx: float, dy: float, seed: int
) -> None:
    """at2 computes the two rows around x alone; the value is column(y).at(x)'s exactly, clamped edges too."""
    factors = np.random.default_rng(seed).lognormal(0.0, 0.3, (rows, cols))
    table = splines.Table((low_x, low_y), factors)
    x, y = low_x + dx * rows * splines.TABLE_STEP, low_y + dy * cols * splines.TABLE_STEP
    assert table.at2(x, y) == table.column(y).at(x)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(1e-3, 10.0), min_size=4, max_size=4),
    st.floats(1.0, 4096.0),
    st.floats(1.0, 1e5),
    st.sampled_from([(32, 8, 128, 2), (64, 8, 128, 1), (8, 1, 64, 2)]),
)
def test_one_prefill_attention_shape_as_a_float_is_the_array_curve_to_the_bit(
    params: list[float], batch: float, isl: float, shape: tuple[int, int, int, int]
) -> None:
    """The engine's scalar read (no numpy call) gives the fitted curve's value exactly, in both regimes."""
    heads, kv_heads, head_dim, kv_bytes = shape
    args = (params, 989e12, 3.35e12, batch, isl, heads, kv_heads, head_dim, kv_bytes)
    one = curves.prefill_attention_one(*args)
    assert type(one) is float and one == float(curves.prefill_attention(*args))
    for broken in ([1.0, 100.0, float("nan"), 1e-5], [float("nan"), 100.0, 1.0, 1e-5]):  # NaN as numpy gives it
        assert math.isnan(curves.prefill_attention_one(broken, *args[1:]))
