"""`ttftsim fit --select`: which of the named factors to fit, chosen by cross-validation (best subset, then
the fewest factors the best subset does not beat clearly)."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace

from ttftsim.accuracy.fit import Evaluator, FitResult, Verdict, fit, fitted_ratios, folds_of
from ttftsim.accuracy.harness import StageResult
from ttftsim.config.deployment_calibration import FactorName, Factors


def run_errors(results: Sequence[StageResult]) -> dict[str, float]:
    """Each run's mean absolute percentage error over the metrics it is fitted on (metrics_of) in its stages
    not measured as overloaded (runs without such a stage are left out, for every subset alike). A prediction
    that overloads (infinite) counts as RATIO_CLIP times the measurement, as in the fit's objective."""
    errors: dict[str, list[float]] = {}
    for run, ratio in fitted_ratios(results):
        errors.setdefault(run, []).append(abs(ratio - 1))
    return {run: statistics.fmean(values) for run, values in errors.items()}


def paired_difference(before: dict[str, float], after: dict[str, float]) -> tuple[float, float] | None:
    """The mean of the paired per-run differences `after - before` and its standard error (0 with one run);
    None when no run is on both sides (a run that only one side predicts counts as nothing shown)."""
    differences = [after[run] - before[run] for run in before if run in after]
    if not differences:
        return None
    mean = statistics.fmean(differences)
    if len(differences) == 1:
        return mean, 0.0
    return mean, statistics.stdev(differences) / math.sqrt(len(differences))


def clear_improvement(before: dict[str, float], after: dict[str, float]) -> bool:
    """Whether `after` predicts the runs better than `before` by more than the noise of the comparison: the
    mean of the paired per-run differences is below zero by more than its standard error (a paired variant of
    the one-standard-error rule of cross-validated model selection, Hastie, Tibshirani and Friedman, The
    Elements of Statistical Learning, 2nd ed., section 7.10, which uses the best model's own standard error;
    with one run, any decrease). So a gain on one run alone, the others unchanged, is never clear (its mean is
    its standard error), however large. Runs held out together in one fold (more than MAX_LOO_RUNS runs) share
    a fit, so the standard error is a little low."""
    return _is_clear(paired_difference(before, after))


def _is_clear(paired: tuple[float, float] | None) -> bool:
    """The rule of clear_improvement on a paired difference (mean, standard error)."""
    return paired is not None and paired[0] + paired[1] < 0


def select(evaluator: Evaluator, progress: Callable[[str], None] = lambda _: None) -> FitResult:
    """Best-subset selection of the problem's factors by cross-validation, with the one-standard-error rule
    (Hastie, Tibshirani and Friedman, The Elements of Statistical Learning, 2nd ed., section 7.10): fit every
    subset of the factors (each with its own folds, `fit`; the empty one is the unfitted model), take the
    subset whose held-out runs have the lowest mean error (run_errors), then keep the subset with the fewest
    factors that it does not beat clearly (clear_improvement: by more than one standard error of the paired
    per-run differences). Factors that help only together are found (forward selection, adding one at a time,
    misses them). With the empty subset kept the calibration is neutral: no factor predicts runs it was not
    fitted to clearly better. Returns the kept subset's fit, with every subset and its mean held-out error
    (`selection`). Its cross-validated errors were used to choose it, so they flatter it a little."""
    names = evaluator.problem.names
    runs = list(range(len(evaluator.problem.cases)))
    unfitted = evaluator.results(Factors(), runs)
    subsets: list[tuple[FactorName, ...]] = [
        subset for size in range(len(names) + 1) for subset in itertools.combinations(names, size)
    ]
    neutral = FitResult((), Factors(), [Factors() for _ in folds_of(len(runs))], unfitted, unfitted, unfitted)
    fits: dict[tuple[FactorName, ...], FitResult] = {(): neutral}
    errors: dict[tuple[FactorName, ...], dict[str, float]] = {(): run_errors(unfitted)}
    for subset in subsets[1:]:
        progress(f"selection: fitting {', '.join(subset)}")
        fits[subset] = fit(evaluator.with_names(subset), progress)
        errors[subset] = run_errors(fits[subset].cross_validated)
    best = min(subsets, key=lambda subset: _mean(errors[subset]))  # a tie: the first (fewer factors)
    kept = min(
        (subset for subset in subsets if not clear_improvement(errors[subset], errors[best])),
        key=lambda subset: (len(subset), _mean(errors[subset])),
    )
    return replace(fits[kept], selection=tuple((subset, _mean(errors[subset])) for subset in subsets))


def judge(result: FitResult) -> FitResult:
    """`fit`'s result (with cross-validation) with its verdict: whether it predicts the runs each fold held out
    clearly better than the unfitted model (clear_improvement: the rule select applies between subsets, here
    between none and every named factor)."""
    unfitted, held_out = run_errors(result.unfitted), run_errors(result.cross_validated)
    paired = paired_difference(unfitted, held_out)
    standard_error = paired[1] if paired is not None else 0.0
    return replace(result, verdict=Verdict(_mean(unfitted), _mean(held_out), standard_error, _is_clear(paired)))


def guarded(result: FitResult) -> FitResult:
    """The judged fit (judge) if it is clearly better than none, else the neutral calibration with the fit kept
    aside whole as `rejected`. A fit that only follows its runs' noise, or a mechanism ttftsim lacks that some
    runs show and others do not, predicts runs it was not fitted to worse than none (docs/fit.md); it is not
    handed out as a calibration."""
    judged = judge(result)
    assert judged.verdict is not None
    if judged.verdict.clear:
        return judged
    neutral = [Factors() for _ in result.fold_factors]
    return FitResult(
        (),
        Factors(),
        neutral,
        result.unfitted,
        result.unfitted,
        result.unfitted,
        verdict=judged.verdict,
        rejected=judged,
    )


def _mean(errors: dict[str, float]) -> float:
    return statistics.fmean(errors.values()) if errors else math.inf
