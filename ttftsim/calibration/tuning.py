"""Choose a correction's settings on the validation regions; report error on the train, validation and test
regions (regions.py) of one table.

The settings are the spline's knot count per feature and its damping toward the bare curve (splines.py).
For every candidate the curve and the correction are fitted on the train rows and scored on the validation
rows (median + P90 absolute percentage error); the lowest score wins, the simpler candidate on a tie.
`choose` is handed the train and validation rows only, so nothing about the test rows reaches the choice.
The winner is then fitted on train + validation and scored once on the test rows, as are the shipped
settings (curves.CORRECTIONS) and the uncalibrated roofline, for comparison.

Candidates' corrections are solved from the normal equations, (D'D + damping^2 I) c = D'r with D the spline
design over the fitted rows (or the same system over rows where there are fewer rows than coefficients):
the minimiser the shipped fit's lsqr converges to, one Gram matrix per knot count shared by every damping
(lsqr per candidate would take most of an hour per GPU). Deterministic: no random start, a fixed split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ttftsim.calibration import curve_fit, curves, splines
from ttftsim.calibration.regions import Split
from ttftsim.config.hardware import HardwareProfile

Array = curves.Array
KNOTS = (4, 6, 8, 10)  # 12 would mean 5,000-7,000 coefficients on attention: minutes per damping
DAMPINGS = (1.0, 0.1, 0.01, 0.001)  # strongest first: on a tie the smoother candidate wins


@dataclass(frozen=True)
class Settings:
    """What is tuned: at most `max_knots` knots per feature, and the damping of the coefficients."""

    max_knots: int
    damping: float

    @classmethod
    def shipped(cls, op: str) -> Settings:
        spec = curves.CORRECTIONS[op]
        return cls(spec.max_knots, spec.damping)

    def to_json(self) -> dict[str, float]:
        return {"max_knots": self.max_knots, "damping": self.damping}


@dataclass(frozen=True)
class Scored:
    """A fit's JSON-ready summary, and its absolute percentage errors per set of rows (pooled per class)."""

    summary: dict[str, Any]
    errors: dict[str, Array]


@dataclass(frozen=True)
class Model:
    """A curve's fitted parameters and correction."""

    params: list[float]
    correction: splines.Correction

    def predict(self, op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str) -> Array:
        curve = curve_fit.predict(op, frame, hw, dtype, self.params)
        return np.asarray(curve * np.exp(self.correction(curve_fit.features(op, frame))))


def solve_corrections(
    x: Array, residual: Array, groups: tuple[tuple[int, ...], ...], max_knots: int, dampings: tuple[float, ...]
) -> list[splines.Correction]:
    """The damped least-squares correction for each damping, knots placed as splines.fit_correction does."""
    from scipy import sparse

    terms = [splines.Term(g, tuple(splines.Axis.from_values(x[:, f], max_knots) for f in g)) for g in groups]
    design = sparse.hstack([term.design(x) for term in terms]).tocsr()
    sizes = np.cumsum([0, *(term.size for term in terms)])
    out = []
    for coefficients in _ridge(design, residual, dampings):
        fitted = (
            splines.Term(t.features, t.axes, tuple(float(c) for c in coefficients[a:b]))
            for t, a, b in zip(terms, sizes[:-1], sizes[1:], strict=True)
        )
        out.append(splines.Correction(tuple(fitted)))
    return out


def _ridge(design: Any, residual: Array, dampings: tuple[float, ...]) -> list[Array]:
    """argmin |D c - r|^2 + damping^2 |c|^2 for each damping, by a dense solve over the smaller side of D:
    coefficients (D'D + d^2 I) c = D'r, or rows c = D'(DD' + d^2 I)^-1 r (an MoE table has fewer rows than
    coefficients), the same minimiser."""
    from scipy import linalg

    rows, size = design.shape
    gram = np.asarray((design @ design.T if rows < size else design.T @ design).toarray())
    rhs = residual if rows < size else np.asarray(design.T @ residual)
    out = []
    for damping in dampings:
        solution = linalg.solve(gram + damping**2 * np.eye(len(gram)), rhs, assume_a="pos")
        out.append(np.asarray(design.T @ solution) if rows < size else solution)
    return out


def fit_model(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str, settings: Settings) -> Model:
    params = curve_fit.fit_curve(op, frame, hw, dtype)
    residual = np.log(frame["seconds"].to_numpy() / curve_fit.predict(op, frame, hw, dtype, params))
    groups = curves.CORRECTIONS[op].groups
    x = curve_fit.features(op, frame)
    return Model(params, solve_corrections(x, residual, groups, settings.max_knots, (settings.damping,))[0])


def score(errors: Array) -> float:
    """What the choice minimises: median + P90 absolute percentage error."""
    return float(np.median(errors) + np.quantile(errors, 0.9))


def choose(op: str, train: pd.DataFrame, validation: pd.DataFrame, hw: HardwareProfile, dtype: str) -> Settings:
    """The candidate settings with the lowest validation score, fitted on the train rows."""
    params = curve_fit.fit_curve(op, train, hw, dtype)
    residual = np.log(train["seconds"].to_numpy() / curve_fit.predict(op, train, hw, dtype, params))
    x_train, x_validation = curve_fit.features(op, train), curve_fit.features(op, validation)
    curve = curve_fit.predict(op, validation, hw, dtype, params)
    measured = validation["seconds"].to_numpy()
    best: tuple[float, Settings] | None = None
    for knots in KNOTS:
        corrections = solve_corrections(x_train, residual, curves.CORRECTIONS[op].groups, knots, DAMPINGS)
        for damping, correction in zip(DAMPINGS, corrections, strict=True):
            value = score(curve_fit.ape(curve * np.exp(correction(x_validation)), measured))
            if best is None or value < best[0]:
                best = (value, Settings(knots, damping))
    assert best is not None
    return best[1]


def evaluate(op: str, frame: pd.DataFrame, hw: HardwareProfile, dtype: str, split: Split) -> Scored:
    """Settings chosen on validation, the rows and blocks of each split; errors on each split, and on test
    for the shipped settings and the roofline."""
    train, validation, test = frame[split.train], frame[split.validation], frame[split.test]
    settings = choose(op, train, validation, hw, dtype)
    tuned = fit_model(op, train, hw, dtype, settings)
    seen = frame[np.logical_not(split.test)]
    final = fit_model(op, seen, hw, dtype, settings)
    shipped = fit_model(op, seen, hw, dtype, Settings.shipped(op))
    measured = test["seconds"].to_numpy()
    errors = {
        "train": curve_fit.ape(tuned.predict(op, train, hw, dtype), train["seconds"].to_numpy()),
        "validation": curve_fit.ape(tuned.predict(op, validation, hw, dtype), validation["seconds"].to_numpy()),
        "test": curve_fit.ape(final.predict(op, test, hw, dtype), measured),
        "test_shipped_settings": curve_fit.ape(shipped.predict(op, test, hw, dtype), measured),
        "test_roofline": curve_fit.ape(curve_fit.roofline_predict(op, test, hw, dtype), measured),
    }
    masks = {"train": split.train, "validation": split.validation, "test": split.test}
    summary = {
        "settings": settings.to_json(),
        "points": {name: int(mask.sum()) for name, mask in masks.items()},
        "blocks": {name: split.blocks(mask) for name, mask in masks.items()},
    }
    return Scored(summary, errors)
