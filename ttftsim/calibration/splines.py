"""A smooth correction on top of a roofline curve: sums of tensor-product B-splines over log2 shape features.

A calibration's time is `curve(shape) * exp(correction(features(shape)))`. The curve carries the physics
(compute or memory bound, latency floors) and extrapolates; the correction learns what the roofline cannot
(wave quantisation, kernel choice, occupancy) inside the measured grid. It is an additive model of a few
low-dimensional tensor-product splines (e.g. decode attention: context x batch x KV width, context x GQA
ratio x head size), fitted by damped least squares (`scipy.sparse.linalg.lsqr`) so that shape regions the
table never measured stay close to the curve. Features outside the knots are clamped: the correction holds
its boundary value there, and the caller warns (the curve alone decides how time grows).

Each dimension uses cubic B-splines with knots at quantiles of the measured values (at most `max_knots`),
a lower degree when a dimension has fewer distinct values, and a constant when it has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Axis:
    """One feature's spline basis: knot vector and degree; degree -1 is a single constant basis."""

    knots: tuple[float, ...]
    degree: int

    @property
    def size(self) -> int:
        return 1 if self.degree < 0 else len(self.knots) - self.degree - 1

    @classmethod
    def from_values(cls, values: Array, max_knots: int) -> Axis:
        distinct = np.unique(values)
        if len(distinct) > max_knots:
            distinct = np.unique(np.quantile(distinct, np.linspace(0.0, 1.0, max_knots)))
        degree = min(3, len(distinct) - 1)
        if degree == 0:
            return cls((float(distinct[0]),), -1)
        padded = np.concatenate([[distinct[0]] * degree, distinct, [distinct[-1]] * degree])
        return cls(tuple(float(v) for v in padded), degree)

    def nonzero(self, x: Array) -> tuple[NDArray[np.int64], Array]:
        """Per point, the indices and values of the degree + 1 basis functions that can be non-zero there
        (Cox-de Boor on the knot span, vectorised over points; x is clamped to the knots)."""
        if self.degree < 0:
            return np.zeros((len(x), 1), dtype=np.int64), np.ones((len(x), 1))
        t, k = np.asarray(self.knots), self.degree
        x = np.clip(x, t[0], t[-1])
        span = np.clip(np.searchsorted(t, x, side="right") - 1, k, len(t) - k - 2)
        values = np.zeros((len(x), k + 1))
        values[:, 0] = 1.0
        left = np.empty((len(x), k + 1))
        right = np.empty((len(x), k + 1))
        for j in range(1, k + 1):
            left[:, j] = x - t[span + 1 - j]
            right[:, j] = t[span + j] - x
            saved = np.zeros(len(x))
            for r in range(j):
                temp = values[:, r] / (right[:, r + 1] + left[:, j - r])
                values[:, r] = saved + right[:, r + 1] * temp
                saved = left[:, j - r] * temp
            values[:, j] = saved
        return span[:, None] - k + np.arange(k + 1), values


@dataclass(frozen=True)
class Term:
    """A tensor-product spline over some of the features, with its coefficients."""

    features: tuple[int, ...]
    axes: tuple[Axis, ...]
    coefficients: tuple[float, ...] = ()

    @property
    def size(self) -> int:
        return int(np.prod([axis.size for axis in self.axes]))

    def _flat(self, x: Array, fixed: dict[int, float]) -> tuple[NDArray[np.int64], Array]:
        """Flat coefficient indices and basis products at the points; features in `fixed` take that value."""
        index = np.zeros((len(x), 1), dtype=np.int64)
        value = np.ones((len(x), 1))
        for feature, axis in zip(self.features, self.axes, strict=True):
            column = np.full(len(x), fixed[feature]) if feature in fixed else x[:, feature]
            idx, val = axis.nonzero(column)
            index = (index[:, :, None] * axis.size + idx[:, None, :]).reshape(len(x), -1)
            value = (value[:, :, None] * val[:, None, :]).reshape(len(x), -1)
        return index, value

    def design(self, x: Array) -> Any:
        """Rows of the tensor-product basis at the points x (one row per point, features as columns), as a
        scipy sparse matrix (imported here: only fitting needs scipy)."""
        from scipy import sparse

        index, value = self._flat(x, {})
        rows = np.repeat(np.arange(len(x)), index.shape[1])
        return sparse.csr_matrix((value.ravel(), (rows, index.ravel())), shape=(len(x), self.size))

    def __call__(self, x: Array) -> Array:
        index, value = self._flat(x, {})
        result: Array = np.sum(np.asarray(self.coefficients)[index] * value, axis=1)
        return result


@dataclass(frozen=True)
class Correction:
    """The sum of terms: log(measured / curve) as a function of the features."""

    terms: tuple[Term, ...]

    def __call__(self, x: Array) -> Array:
        total = np.zeros(len(x))
        for term in self.terms:
            total += term(x)
        return total

    def tabulate(self, free: tuple[int, ...], point: Array) -> Table:
        """exp(correction) on a fine grid over one or two features, the others held at `point`: what the
        simulator reads every iteration (linear interpolation, 1/8 octave apart: within 0.1% of the spline)."""
        spans = []
        for feature in free:
            knots = [a.knots for t in self.terms for f, a in zip(t.features, t.axes, strict=True) if f == feature]
            low = min((k[0] for k in knots), default=0.0)
            high = max((k[-1] for k in knots), default=0.0)
            spans.append((low, max(1, math.ceil((high - low) / TABLE_STEP)) + 1))
        axes = [low + TABLE_STEP * np.arange(count) for low, count in spans]
        mesh = np.meshgrid(*axes, indexing="ij")
        points = np.tile(point, (mesh[0].size, 1))
        for feature, values in zip(free, mesh, strict=True):
            points[:, feature] = values.ravel()
        factors = np.exp(self(points)).reshape(mesh[0].shape)
        return Table(tuple(low for low, _ in spans), factors)

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "features": list(t.features),
                "axes": [{"knots": list(a.knots), "degree": a.degree} for a in t.axes],
                "coefficients": [float(f"{c:.6g}") for c in t.coefficients],
            }
            for t in self.terms
        ]

    @classmethod
    def from_json(cls, data: list[dict[str, Any]]) -> Correction:
        return cls(
            tuple(
                Term(
                    tuple(t["features"]),
                    tuple(Axis(tuple(a["knots"]), int(a["degree"])) for a in t["axes"]),
                    tuple(t["coefficients"]),
                )
                for t in data
            )
        )


TABLE_STEP = 1.0 / 8


@dataclass(frozen=True)
class Table:
    """A correction factor tabulated on a regular log2 grid (TABLE_STEP apart from `low`), clamped at the
    edges. One or two dimensions; every dimension has at least two points (tabulate makes them so)."""

    low: tuple[float, ...]
    factors: Array
    _values: list[float] = field(init=False, repr=False, compare=False)  # 1-D factors as floats: at() is hot
    _rows: list[list[float]] = field(init=False, repr=False, compare=False)  # 2-D factors as floats: at2() is hot
    _grid: Array | None = field(init=False, repr=False, compare=False)  # 1-D: where the factors lie, once along()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_values", self.factors.tolist() if self.factors.ndim == 1 else [])
        object.__setattr__(self, "_rows", self.factors.tolist() if self.factors.ndim == 2 else [])
        object.__setattr__(self, "_grid", None)

    def at(self, x: float) -> float:
        """1-D, one point."""
        values = self._values
        i, w = _cell(x, self.low[0], len(values))
        return values[i] * (1.0 - w) + values[i + 1] * w

    def along(self, x: Array) -> Array:
        """1-D, many points."""
        grid = self._grid
        if grid is None:  # made at the first call (column() makes a table for each prefill shape, most never along)
            grid = self.low[0] + TABLE_STEP * np.arange(len(self.factors), dtype=np.float64)
            object.__setattr__(self, "_grid", grid)
        return np.interp(x, grid, self.factors)

    def column(self, y: float) -> Table:
        """2-D -> 1-D: the factors along the first dimension at y in the second."""
        j, w = _cell(y, self.low[1], self.factors.shape[1])
        return Table(self.low[:1], self.factors[:, j] * (1.0 - w) + self.factors[:, j + 1] * w)

    def at2(self, x: float, y: float) -> float:
        """2-D, one point (bilinear): `column(y).at(x)` on the two rows around x alone, the same operations in
        the same order (so the same value to the last bit), without making the column."""
        rows = self._rows
        j, v = _cell(y, self.low[1], len(rows[0]))
        i, w = _cell(x, self.low[0], len(rows))
        below, above = rows[i], rows[i + 1]
        return (below[j] * (1.0 - v) + below[j + 1] * v) * (1.0 - w) + (above[j] * (1.0 - v) + above[j + 1] * v) * w


def _cell(x: float, low: float, size: int) -> tuple[int, float]:
    """The grid interval holding x (clamped to the grid) and x's weight toward its upper end."""
    position = min(max((x - low) / TABLE_STEP, 0.0), size - 1.0)
    index = min(int(position), size - 2)
    return index, position - index


def fit_correction(
    x: Array, residual: Array, groups: tuple[tuple[int, ...], ...], max_knots: int, damping: float
) -> Correction:
    """Least squares of the residual (log measured / curve) on the summed terms, damped toward zero."""
    from scipy import sparse
    from scipy.sparse.linalg import lsqr

    terms = [Term(g, tuple(Axis.from_values(x[:, f], max_knots) for f in g)) for g in groups]
    design = sparse.hstack([term.design(x) for term in terms]).tocsr()
    solution = lsqr(design, residual, damp=damping, atol=1e-10, btol=1e-10, iter_lim=20_000)[0]
    fitted, start = [], 0
    for term in terms:
        fitted.append(Term(term.features, term.axes, tuple(float(c) for c in solution[start : start + term.size])))
        start += term.size
    return Correction(tuple(fitted))
