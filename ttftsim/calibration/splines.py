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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.interpolate import BSpline
from scipy.sparse.linalg import lsqr

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

    def dense(self, value: float) -> Array:
        """All basis functions at one point (zeros where not supported)."""
        index, values = self.nonzero(np.array([value]))
        out = np.zeros(self.size)
        out[index[0]] = values[0]
        return out


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

    def design(self, x: Array) -> sparse.csr_matrix:
        """Rows of the tensor-product basis at the points x (one row per point, features as columns)."""
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

    def along(self, free: int, point: Array) -> Callable[[Array], Array]:
        """The correction as a function of one feature, the others held at `point`: each term contracted
        over its fixed axes into a 1-D spline (scipy's BSpline), for runs that vary one feature only."""
        constant = 0.0
        lines: list[BSpline] = []
        for term in self.terms:
            if free not in term.features:
                constant += float(term(point[None, :])[0])
                continue
            position = term.features.index(free)
            weights: Array = np.ones(1)
            for feature, axis in zip(term.features, term.axes, strict=True):
                if feature != free:
                    weights = np.asarray(np.kron(weights, axis.dense(float(point[feature]))), dtype=np.float64)
            shape = [axis.size for axis in term.axes]
            coefficients = np.moveaxis(np.asarray(term.coefficients).reshape(shape), position, 0)
            line = coefficients.reshape(shape[position], -1) @ weights
            axis = term.axes[position]
            if axis.degree < 0:
                constant += float(line[0])
            else:
                lines.append(BSpline(np.asarray(axis.knots), line, axis.degree, extrapolate=False))

        def evaluate(values: Array) -> Array:
            total = np.full(len(values), constant)
            for spline in lines:
                total += spline(np.clip(values, spline.t[0], spline.t[-1]))
            return total

        return evaluate

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


def fit_correction(
    x: Array, residual: Array, groups: tuple[tuple[int, ...], ...], max_knots: int, damping: float
) -> Correction:
    """Least squares of the residual (log measured / curve) on the summed terms, damped toward zero."""
    terms = [Term(g, tuple(Axis.from_values(x[:, f], max_knots) for f in g)) for g in groups]
    design = sparse.hstack([term.design(x) for term in terms]).tocsr()
    solution = lsqr(design, residual, damp=damping, atol=1e-10, btol=1e-10, iter_lim=20_000)[0]
    fitted, start = [], 0
    for term in terms:
        fitted.append(Term(term.features, term.axes, tuple(float(c) for c in solution[start : start + term.size])))
        start += term.size
    return Correction(tuple(fitted))
