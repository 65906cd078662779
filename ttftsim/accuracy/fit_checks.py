"""Whether a set of runs can identify the factors asked for, checked before fitting; a refusal is one line.

- At least MIN_RUNS runs that can be simulated (cross-validation needs a run to hold out).
- With more than one factor, runs at more than one load level (rate or concurrency): at one level a fixed
  cost and a load-dependent one move every prediction the same way, and nothing tells them apart.
- Each factor moves some prediction: a step of PROBE_STEP (10 % on a scale, PROBE_OVERHEAD_S on the
  overhead) must change some fitted metric by MIN_EFFECT (0.5 %), else the runs say nothing about it
  (e.g. the attention scale on a measured step cost without attention terms).
- The factors' effects are not (nearly) proportional: the sensitivities of the fitted metrics to the
  factors, each column scaled to unit length, must have a smallest singular value of MIN_SINGULAR; the
  factors with the largest weights in the direction that is missing are named.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ttftsim.accuracy.fit import OVERHEAD_UNIT_S, Evaluator, to_vector
from ttftsim.accuracy.ground_truth import Case
from ttftsim.config.deployment_calibration import Factors
from ttftsim.errors import InputError

MIN_RUNS = 2
PROBE_STEP = math.log(1.1)
PROBE_OVERHEAD_S = 0.001
MIN_EFFECT = math.log(1.005)
MIN_SINGULAR = 0.05
SOURCE = "ttftsim fit"


def load_level(case: Case) -> str:
    """A run's load level, from its workload's arrivals (rate, stages or clients) or its stages."""
    workload = case.scenario.workload
    arrivals = getattr(workload, "arrivals", None)
    if arrivals is not None:
        return str(arrivals.model_dump_json(include={"type", "rate", "clients", "stages", "cv"}))
    return ",".join(stage.label for stage in case.stages)  # a replayed trace: the label says its mean rate


def check_runs(cases: Sequence[Case], num_factors: int) -> None:
    if len(cases) < MIN_RUNS:
        raise InputError(
            SOURCE,
            "runs",
            f"{len(cases)} run(s) to fit: cross-validation needs at least {MIN_RUNS} (give more reports)",
        )
    levels = {load_level(case) for case in cases}
    if num_factors > 1 and len(levels) == 1:
        label = cases[0].stages[0].label if cases[0].stages else "one level"
        raise InputError(
            SOURCE, "runs", f"all {len(cases)} runs are at one load level ({label}): fixed and load-dependent "
            "costs cannot be told apart; add runs at another rate or concurrency, or fit one factor (--factors)",
        )  # fmt: skip


def check_effects(evaluator: Evaluator) -> None:
    """Refuse a factor without effect on the runs, or factors whose effects cannot be told apart."""
    problem = evaluator.problem
    runs = list(range(len(problem.cases)))
    names = problem.names
    origin = to_vector(names, Factors())
    base = evaluator.residuals(origin, runs)
    columns = []
    for i, name in enumerate(names):
        step = PROBE_OVERHEAD_S / OVERHEAD_UNIT_S if name == "step_overhead_s" else PROBE_STEP
        probe = origin.copy()
        probe[i] += step
        moved = evaluator.residuals(probe, runs)
        change = moved - base if moved.shape == base.shape else np.ones_like(base)  # a metric came or went
        if not len(change) or float(np.max(np.abs(change))) < MIN_EFFECT:
            others = ",".join(other for other in names if other != name) or "another factor"
            raise InputError(
                SOURCE, name, f"has no effect on these runs' predictions (a {_probe(name)} change moves no fitted "
                f"metric by 0.5 %): the runs cannot identify it; fit --factors {others}",
            )  # fmt: skip
        columns.append(change / np.linalg.norm(change))
    if len(columns) < 2:
        return
    _, singular, right = np.linalg.svd(np.column_stack(columns), full_matrices=False)
    if singular[-1] < MIN_SINGULAR:
        weights = np.abs(right[-1])
        tangled = [names[i] for i in np.argsort(-weights) if weights[i] > 0.3]
        raise InputError(
            SOURCE, ", ".join(tangled), "move these runs' predictions (nearly) the same way: the runs cannot tell "
            f"them apart (smallest singular value {singular[-1]:.3f}); add runs that differ in load or lengths, "
            "or fit fewer factors (--factors)",
        )  # fmt: skip


def _probe(name: str) -> str:
    return f"{PROBE_OVERHEAD_S * 1e3:g} ms" if name == "step_overhead_s" else "10 %"
