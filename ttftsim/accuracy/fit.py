"""Fit a few deployment factors (config/deployment_calibration.py) to a team's measured runs, with k-fold
cross-validation over runs.

Objective: the sum of squared log ratios predicted / measured of each run's TTFT P50, P90, P99 and TPOT
P50 (a closed loop with a warm-up: its TTFT and TPOT means), over the runs not overloaded, minimised by
scipy's bounded Nelder-Mead (scipy.optimize.minimize; deterministic: a fixed first simplex). Every
prediction is the accuracy harness's (harness.run_case: the same seeds, the same windows), with the
factors written to a calibration file that the scenario's engine names, so a fit is evaluated through the
same hook as a user's later runs. Scales are fitted in log space; the overhead in
units of OVERHEAD_UNIT_S.

Cross-validation: runs dealt to k folds in order (k = the number of runs, leave-one-out, up to MAX_LOO_RUNS
runs; else DEFAULT_FOLDS); each fold is fitted on the other runs as if its own did not exist (from the neutral
factors, as the fit on all runs) and predicts its own. A factor's interval is the range of its fold fits (and of
the fit on every run).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

from ttftsim.accuracy.ground_truth import Case
from ttftsim.accuracy.harness import NUM_SEEDS_RANDOM, StageResult, run_case
from ttftsim.config.deployment_calibration import FactorName, Factors
from ttftsim.processes import local_pool, usable_workers

FIT_METRICS = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "ttft_mean", "tpot_mean")
OPEN_LOOP_METRICS = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50")
CLOSED_LOOP_METRICS = ("ttft_mean", "tpot_mean")
MAX_LOO_RUNS = 8
DEFAULT_FOLDS = 5
OVERHEAD_UNIT_S = 0.005  # the overhead's fitting unit: a forward-difference step of 0.05 units is 0.25 ms
SCALE_BOUNDS = (0.05, 20.0)
AT_BOUND_LOG = 0.02  # a scale within 2 % of a bound has stopped there (FitResult.at_bounds)
MAX_OVERHEAD_S = 0.2
AT_BOUND_OVERHEAD_S = 5e-5  # the overhead within the fit's tolerance of a bound
RATIO_CLIP = 1e3  # an overloaded prediction (infinite TTFT) counts as 1000x the measurement
SIMPLEX_STEP = 0.5  # the first simplex: x 1.65 on a scale, 2.5 ms on the overhead
X_TOLERANCE = 0.01  # 1 % on a scale, 0.05 ms on the overhead
F_TOLERANCE = 1e-4
EVALUATIONS_PER_FACTOR = 40
PROGRESS_EVERY = 20
FIT_SEEDS = 1  # the optimiser sees one seed per run (a third of the time); what is reported pools the harness's


@dataclass(frozen=True)
class Problem:
    """What is fitted: the runs, which factors, and the lower bound of the overhead (minus the smallest host
    time per step, so that no step's host time goes below zero)."""

    cases: list[Case]
    base: Path
    folder: Path  # where the trial calibration files go
    hardware: str
    names: tuple[FactorName, ...]
    min_overhead_s: float


def to_factors(names: Sequence[FactorName], x: Sequence[float] | NDArray[np.float64]) -> Factors:
    values = {
        name: (value * OVERHEAD_UNIT_S if name == "step_overhead_s" else math.exp(value))
        for name, value in zip(names, (float(v) for v in x), strict=True)
    }
    return Factors.model_validate(values)


def _coordinate(name: FactorName, value: float) -> float:
    """A factor's value where the optimiser works: log of a scale, the overhead in OVERHEAD_UNIT_S."""
    return value / OVERHEAD_UNIT_S if name == "step_overhead_s" else math.log(value)


def to_vector(names: Sequence[FactorName], factors: Factors) -> NDArray[np.float64]:
    return np.asarray([_coordinate(name, getattr(factors, name)) for name in names], dtype=np.float64)


def factor_range(name: FactorName, min_overhead_s: float) -> tuple[float, float]:
    """Where a factor is searched, in its own units: a scale within SCALE_BOUNDS; the overhead from minus the
    deployment's smallest host time per step (none left) to MAX_OVERHEAD_S."""
    return (-min_overhead_s, MAX_OVERHEAD_S) if name == "step_overhead_s" else SCALE_BOUNDS


def bounds(problem: Problem) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    ranges = [(name, factor_range(name, problem.min_overhead_s)) for name in problem.names]
    lows = [_coordinate(name, low) for name, (low, _) in ranges]
    highs = [_coordinate(name, high) for name, (_, high) in ranges]
    return np.asarray(lows, dtype=np.float64), np.asarray(highs, dtype=np.float64)


class Evaluator:
    """Predictions of runs under factors, memoised by the factor values (least squares asks again)."""

    def __init__(
        self,
        problem: Problem,
        progress: Callable[[str], None] = lambda _: None,
        shared: Evaluator | None = None,
        workers: int = 1,
    ) -> None:
        """shared: an evaluator of the same runs (fitting other factors) whose predictions, trial files and
        processes this one shares (fit_select tries several sets of factors on one memo). workers > 1: the runs
        of one evaluation are simulated in that many processes (the same predictions: each run's seeds are its
        own); `close` ends them."""
        self.problem = problem
        self.progress = progress
        self.evaluations = 0
        # one run's predictions under one set of factor values and seeds: a fold's evaluation reuses the runs it
        # shares with an earlier evaluation at the same values (the neutral start and first simplex of every fit)
        self._memo: dict[tuple[tuple[float, ...], int, int], list[StageResult]] = {} if shared is None else shared._memo
        self._files: itertools.count[int] = itertools.count(1) if shared is None else shared._files  # trial-N
        self._pool: ProcessPoolExecutor | None
        if shared is not None:
            self._pool = shared._pool
        else:
            count = usable_workers(workers, len(problem.cases))
            self._pool = local_pool(count) if count > 1 else None

    def with_names(self, names: tuple[FactorName, ...]) -> Evaluator:
        """An evaluator of the same runs fitting other factors, sharing this one's predictions and files."""
        return Evaluator(replace(self.problem, names=names), self.progress, shared=self)

    def calibration_file(self, factors: Factors) -> Path:
        path = self.problem.folder / f"trial-{next(self._files)}.json"
        document = {
            "format": "ttftsim-deployment-calibration",
            "version": 1,
            "hardware": self.problem.hardware,
            "factors": factors.model_dump(),
        }
        path.write_text(json.dumps(document), encoding="utf-8")
        return path

    def close(self) -> None:
        """End the worker processes (an evaluator sharing them must not be used after)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None

    def results(self, factors: Factors, runs: Sequence[int], max_seeds: int = NUM_SEEDS_RANDOM) -> list[StageResult]:
        """The runs' predictions under the factors: the harness's (seeds pooled) to report, FIT_SEEDS to fit."""
        values = tuple(factors.model_dump().values())
        missing = [index for index in runs if (values, index, max_seeds) not in self._memo]
        if missing:
            path = str(self.calibration_file(factors).resolve())
            cases = [self._calibrated(self.problem.cases[index], path) for index in missing]
            base = self.problem.base
            if self._pool is not None and len(cases) > 1:
                futures = [self._pool.submit(run_case, case, base, max_seeds) for case in cases]
                predicted = [future.result() for future in futures]
            else:
                predicted = [run_case(case, base, max_seeds) for case in cases]
            for index, stages in zip(missing, predicted, strict=True):
                self._memo[(values, index, max_seeds)] = stages
        return [stage for index in runs for stage in self._memo[(values, index, max_seeds)]]

    @staticmethod
    def _calibrated(case: Case, path: str) -> Case:
        engine = case.scenario.engine.model_copy(update={"calibration": path})
        return replace(case, scenario=case.scenario.model_copy(update={"engine": engine}))

    def residuals(self, x: Sequence[float] | NDArray[np.float64], runs: Sequence[int]) -> NDArray[np.float64]:
        self.evaluations += 1
        if self.evaluations % PROGRESS_EVERY == 0:
            self.progress(f"  {self.evaluations} evaluations")
        return residuals_of(self.results(to_factors(self.problem.names, x), runs, FIT_SEEDS))


def fitted_ratios(results: Sequence[StageResult]) -> Iterator[tuple[str, float]]:
    """(run, predicted / measured) per fitted metric (metrics_of) of every scored stage (StageResult.is_scored),
    clipped to [1 / RATIO_CLIP, RATIO_CLIP]: an overloaded (infinite) prediction is RATIO_CLIP."""
    for result in results:
        if not result.is_scored:
            continue
        for metric in metrics_of(result):
            measured, predicted = result.measured.get(metric), result.predicted.get(metric)
            if measured is None or predicted is None or not measured > 0:
                continue
            ratio = predicted / measured if math.isfinite(predicted) else RATIO_CLIP
            yield result.case, min(RATIO_CLIP, max(1 / RATIO_CLIP, ratio))


def residuals_of(results: Sequence[StageResult]) -> NDArray[np.float64]:
    """log(predicted / measured) per fitted metric of every scored stage."""
    return np.asarray([math.log(ratio) for _, ratio in fitted_ratios(results)], dtype=np.float64)


def metrics_of(result: StageResult) -> tuple[str, ...]:
    """The percentiles where the run has them, else (a closed loop after a warm-up) the means."""
    return OPEN_LOOP_METRICS if "ttft_p50" in result.measured else CLOSED_LOOP_METRICS


def fit_runs(
    evaluator: Evaluator, runs: Sequence[int], start: NDArray[np.float64], step: float = SIMPLEX_STEP
) -> NDArray[np.float64]:
    """The factor vector that minimises the runs' summed squared log errors, within bounds: Nelder-Mead from
    a simplex of `step` along each factor (a log step on a scale, step x OVERHEAD_UNIT_S on the overhead).
    Derivative-free on purpose: a simulation's percentiles move in small jumps when a batch changes, which
    finite differences read as steep slopes (trust-region least squares stalled on them)."""
    low, high = bounds(evaluator.problem)
    x0 = np.clip(start, low, high)
    simplex = [x0]
    for i in range(len(x0)):
        vertex = x0.copy()
        vertex[i] = vertex[i] + step if vertex[i] + step <= high[i] else vertex[i] - step
        simplex.append(vertex)
    solution = minimize(
        lambda x: float(np.sum(evaluator.residuals(x, runs) ** 2)),
        x0,
        method="Nelder-Mead",
        bounds=list(zip(low, high, strict=True)),
        options={
            "initial_simplex": np.asarray(simplex),
            "xatol": X_TOLERANCE,
            "fatol": F_TOLERANCE,
            "maxfev": EVALUATIONS_PER_FACTOR * len(x0),
        },
    )
    x: NDArray[np.float64] = solution.x
    return x


def folds_of(num_runs: int) -> list[list[int]]:
    """Runs dealt in order to k folds: leave-one-out up to MAX_LOO_RUNS runs."""
    k = num_runs if num_runs <= MAX_LOO_RUNS else DEFAULT_FOLDS
    return [[i for i in range(num_runs) if i % k == fold] for fold in range(k)]


@dataclass(frozen=True)
class Verdict:
    """The fit of every named factor against none, on the runs the cross-validation folds held out
    (fit_select.judge): each run's mean absolute error over its fitted metrics, averaged over runs."""

    unfitted: float
    held_out: float
    standard_error: float  # of the mean paired per-run difference (held out - unfitted)
    clear: bool  # held_out below unfitted by more than the standard error (fit_select.clear_improvement)


@dataclass(frozen=True)
class FitResult:
    """The fit on every run, each fold's fit, and the three sets of predictions (one StageResult list per
    run, in run order)."""

    names: tuple[FactorName, ...]
    factors: Factors
    fold_factors: list[Factors]
    unfitted: list[StageResult]
    in_sample: list[StageResult]
    cross_validated: list[StageResult]
    selection: tuple[tuple[tuple[FactorName, ...], float], ...] = ()  # select(): each set tried, its score
    verdict: Verdict | None = None  # fit_select.judge, where the fit was cross-validated (not --select)
    rejected: FitResult | None = None  # fit_select.guarded: the fit not applied (no clear gain), whole
    min_overhead_s: float | None = None  # Problem.min_overhead_s (the overhead's lower bound is minus this)

    def interval(self, name: FactorName) -> tuple[float, float]:
        """The range of the factor over the fold fits and the fit on every run."""
        values = [getattr(factors, name) for factors in (*self.fold_factors, self.factors)]
        return min(values), max(values)

    def at_bounds(self) -> list[tuple[FactorName, float]]:
        """The factors whose fit on every run stopped at a bound, with that bound: a scale at one of SCALE_BOUNDS,
        the overhead at minus the deployment's smallest host time per step (when known) or at MAX_OVERHEAD_S.
        The hardware profile is then far from the runs, or not of their shape."""
        return self._bounds_hit(self.factors)

    def folds_at_bounds(self) -> list[tuple[FactorName, float, int]]:
        """The factors that stopped at a bound in some cross-validation folds though not in the fit on every run:
        (name, bound, how many folds), in the order found."""
        counts: dict[tuple[FactorName, float], int] = {}
        whole = set(self.at_bounds())
        for factors in self.fold_factors:
            for hit in self._bounds_hit(factors):
                if hit not in whole:
                    counts[hit] = counts.get(hit, 0) + 1
        return [(name, bound, count) for (name, bound), count in counts.items()]

    def _bounds_hit(self, factors: Factors) -> list[tuple[FactorName, float]]:
        found: list[tuple[FactorName, float]] = []
        for name in self.names:
            value = getattr(factors, name)
            if name == "step_overhead_s":
                low, high = factor_range(name, 0.0 if self.min_overhead_s is None else self.min_overhead_s)
                ends = (high,) if self.min_overhead_s is None else (low, high)
                found += [(name, end) for end in ends if abs(value - end) <= AT_BOUND_OVERHEAD_S]
            else:
                found += [(name, end) for end in factor_range(name, 0.0) if abs(math.log(value / end)) <= AT_BOUND_LOG]
        return found


def fit(
    evaluator: Evaluator, progress: Callable[[str], None] = lambda _: None, cross_validate: bool = True
) -> FitResult:
    """The fit on every run, then (cross_validate) each fold's; without folds, the intervals are the fitted
    values themselves and the cross-validated predictions the in-sample ones."""
    problem = evaluator.problem
    floor = problem.min_overhead_s
    runs = list(range(len(problem.cases)))
    neutral = Factors()
    unfitted = evaluator.results(neutral, runs)
    progress("fitting on every run")
    start = to_vector(problem.names, neutral)
    best = fit_runs(evaluator, runs, start)
    factors = to_factors(problem.names, best)
    in_sample = evaluator.results(factors, runs)
    fold_factors, held_out = [], {}
    if not cross_validate:
        return FitResult(problem.names, factors, [factors], unfitted, in_sample, in_sample, min_overhead_s=floor)
    for number, fold in enumerate(folds_of(len(runs)), start=1):
        progress(f"cross-validation fold {number}: runs {', '.join(problem.cases[i].name for i in fold)} held out")
        train = [i for i in runs if i not in fold]
        # fitted as if its held-out runs did not exist: from the neutral factors, as the fit on every run (starting
        # from that fit would carry the held-out runs' pull into their own predictions)
        fold_fit = to_factors(problem.names, fit_runs(evaluator, train, start))
        fold_factors.append(fold_fit)
        for i in fold:
            held_out[i] = evaluator.results(fold_fit, [i])
    cross_validated = [result for i in runs for result in held_out[i]]
    return FitResult(problem.names, factors, fold_factors, unfitted, in_sample, cross_validated, min_overhead_s=floor)


def median_errors(results: Sequence[StageResult], metrics: Sequence[str] = FIT_METRICS) -> dict[str, float]:
    """Median absolute percentage error per metric over the scored stages (neither overloaded nor client-bound)."""
    errors: dict[str, list[float]] = {}
    for result in results:
        if not result.is_scored:
            continue
        for metric, error in result.errors().items():
            if metric in metrics:
                errors.setdefault(metric, []).append(error)
    return {metric: statistics.median(values) for metric, values in errors.items()}
