"""Simulate every ground-truth case and compare predictions with measurements, stage by stage.

A stage is overloaded when the client saw failures (timeouts) or a median TTFT above 10 s; error
statistics are taken over the other stages, and overloaded ones are checked for being predicted as
overloaded. SLO agreement: whether predicted and measured P99 TTFT fall on the same side of each SLO.

Intervals (metrics/intervals.py, 95%): a predicted TTFT percentile gets the order-statistic interval of the
stage's simulated requests; a measured one the same rank interval for its n = rate x duration - failures
requests, read outward from the reported percentiles (conservative). The two agree when they overlap.
Means get mean +/- 1.96 standard errors on the predicted side; a measured mean has no interval (the
per-request values are not published), so it agrees when it lies inside the predicted interval.
A case whose workload is random (Poisson or other random arrivals, a closed loop's random start, sampled
lengths, inference-perf's timers) is simulated with three seeds and the requests pooled; a deterministic one
(evenly spaced sends, fixed lengths) with its own seed only, since other seeds give the same TTFTs to within
microseconds.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ttftsim.accuracy.ground_truth import Case, StageTruth, with_kernel_costs
from ttftsim.config.deployment_calibration import DeploymentCalibration
from ttftsim.config.loading import load_file
from ttftsim.config.scenario import Scenario
from ttftsim.errors import InputError
from ttftsim.metrics.intervals import (
    CONFIDENCE,
    Interval,
    mean_interval,
    overlaps,
    point,
    reported_quantile_interval,
    sample_quantile_interval,
)
from ttftsim.metrics.percentiles import percentile
from ttftsim.metrics.prometheus import server_e2e_s, server_ttft_s
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.processes import local_pool, usable_workers
from ttftsim.simulate import simulate

SLOS_S = (0.2, 0.5, 1.0, 2.0)
OVERLOAD_TTFT_S = 10.0
NUM_SEEDS_RANDOM = 3  # seeds pooled for a case whose workload is random
PERCENTILES = {"ttft_p50": 0.5, "ttft_p90": 0.9, "ttft_p99": 0.99}
_RANDOM_ARRIVALS = ("poisson", "gamma", "weibull", "rate_curve")


@dataclass(frozen=True)
class MetricInterval:
    """One metric of one stage: measured and predicted intervals, and whether they overlap (None when either
    side has no interval at all)."""

    measured: Interval
    predicted: Interval
    overlap: bool | None

    @classmethod
    def of(cls, measured: Interval, predicted: Interval) -> MetricInterval:
        known = all(side.lo is not None or side.hi is not None for side in (measured, predicted))
        return cls(measured, predicted, overlaps(measured, predicted) if known else None)


@dataclass(frozen=True)
class StageResult:
    case: str
    stage: str
    measured: dict[str, float]
    predicted: dict[str, float]
    measured_overloaded: bool
    predicted_overloaded: bool
    intervals: dict[str, MetricInterval] = field(default_factory=dict)
    # the client timed CLIENT_BOUND_SHARE or more of its first tokens with the last (StageTruth.is_client_bound):
    # shown, left out of the error medians
    measured_client_bound: bool = False

    @property
    def is_scored(self) -> bool:
        """Whether the stage counts in the error medians: neither measured overloaded nor client-bound."""
        return not (self.measured_overloaded or self.measured_client_bound)

    def errors(self) -> dict[str, float]:
        """Absolute percentage error per metric both sides have."""
        return {
            k: abs(self.predicted[k] - v) / v
            for k, v in self.measured.items()
            if k in self.predicted and v and np.isfinite(self.predicted[k])
        }


def _stage_window(requests: pd.DataFrame, stage: StageTruth) -> pd.DataFrame:
    return requests[(requests["arrival_s"] >= stage.start_s) & (requests["arrival_s"] < stage.end_s)]


def _predicted_open_loop(window: pd.DataFrame, server_side: bool) -> dict[str, float]:
    """The window's predicted metrics in the measurement's view: the client's, or vLLM's own (server_side)."""
    column, e2e_column = ("server_ttft_s", "server_e2e_s") if server_side else ("ttft_s", "e2e_s")
    done = window[window["status"] == "finished"]
    if len(done) == 0:
        return {
            "ttft_mean": float("inf"),
            "ttft_p50": float("inf"),
            "ttft_p90": float("inf"),
            "ttft_p99": float("inf"),
            "aborted_fraction": 1.0,
        }
    ttft = done[column].to_numpy()
    return {
        "ttft_mean": float(ttft.mean()),
        "ttft_p50": percentile(ttft, 0.5),
        "ttft_p90": percentile(ttft, 0.9),
        "ttft_p99": percentile(ttft, 0.99),
        "tpot_p50": float(done["tpot_s"].median()),
        "e2e_p50": float(done[e2e_column].median()),
        "aborted_fraction": float((window["status"] == "aborted").mean()),
    }


def open_loop_intervals(window: pd.DataFrame, stage: StageTruth, column: str = "ttft_s") -> dict[str, MetricInterval]:
    """Per TTFT percentile (of `column`): the reported percentiles around the measured rank interval, and the
    simulated requests' order-statistic interval; the mean: the predicted standard-error interval; the median
    TPOT: the simulated requests' order-statistic interval (the measured side has none)."""
    ttft = window.loc[window["status"] == "finished", column].to_numpy(dtype=np.float64)
    intervals = {}
    for metric, q in PERCENTILES.items():
        if stage.ttft_levels_s and stage.num_succeeded >= 2:
            measured = reported_quantile_interval(stage.ttft_levels_s, stage.num_succeeded, q)
        else:
            measured = Interval(None, None, None, "no reported percentiles or request count: no interval")
        intervals[metric] = MetricInterval.of(measured, sample_quantile_interval(ttft, q))
    if "ttft_mean" in stage.measured:
        measured = point(stage.measured["ttft_mean"], "reported mean: no interval")
        intervals["ttft_mean"] = MetricInterval.of(measured, mean_interval(ttft))
    if "tpot_p50" in stage.measured:  # a reader keeps the median TPOT only: no measured interval around it
        tpot = window.loc[window["status"] == "finished", "tpot_s"].dropna().to_numpy(dtype=np.float64)
        measured = Interval(None, None, None, "no reported TPOT percentiles kept: no interval")
        intervals["tpot_p50"] = MetricInterval.of(measured, sample_quantile_interval(tpot, 0.5))
    return intervals


def _steady(requests: pd.DataFrame, warmup: int) -> pd.DataFrame:
    return requests[(requests["request_id"] >= warmup) & (requests["status"] == "finished")]


def _predicted_closed_loop(steady: pd.DataFrame) -> dict[str, float]:
    return {"ttft_mean": float(steady["ttft_s"].mean()), "tpot_mean": float(steady["tpot_s"].mean())}


def closed_loop_intervals(steady: pd.DataFrame, stage: StageTruth) -> dict[str, MetricInterval]:
    """Means only: the predicted standard-error interval; the measured mean has none of its own."""
    return {
        metric: MetricInterval.of(
            point(stage.measured[metric], "reported mean: no interval"),
            mean_interval(steady[column].to_numpy(dtype=np.float64)),
        )
        for metric, column in (("ttft_mean", "ttft_s"), ("tpot_mean", "tpot_s"))
        if metric in stage.measured
    }


def is_random(scenario: Scenario) -> bool:
    """Whether other seeds give other requests: random arrivals, a closed loop's random start, or sampled
    prompt / output lengths."""
    workload = scenario.workload
    arrivals = getattr(workload, "arrivals", None)
    kind = getattr(arrivals, "type", None)
    random_arrivals = kind in _RANDOM_ARRIVALS or getattr(arrivals, "process", "constant") != "constant"
    random_start = kind == "closed_loop" and bool(getattr(arrivals, "ramp_up_s", 0.0))
    lengths = (getattr(workload, name, None) for name in ("prompt_tokens", "output_tokens"))
    sampled = any(getattr(length, "type", "fixed") != "fixed" for length in lengths)
    return random_arrivals or random_start or sampled or workload.type in ("trace", "conversation")


def simulated_requests(case: Case, base: Path = Path(), max_seeds: int = NUM_SEEDS_RANDOM) -> pd.DataFrame:
    """The case's simulated requests, pooled over NUM_SEEDS_RANDOM seeds (at most max_seeds) when its workload
    is random, with vLLM's own TTFT and end-to-end latency of each as server_ttft_s and server_e2e_s (NaN without
    a first token / unfinished; metrics/prometheus.py server_ttft_s, server_e2e_s). A seed whose TTFTs repeat an
    earlier seed's exactly is left out: copies would narrow the intervals falsely."""
    num_seeds = min(max_seeds, NUM_SEEDS_RANDOM) if is_random(case.scenario) else 1
    runs: list[pd.DataFrame] = []
    for seed in range(case.scenario.seed, case.scenario.seed + num_seeds):
        result = simulate(case.scenario, base, seed=seed, source=case.name)
        requests = result.requests
        extra = result.replica.engine.api_server.server_ttft_extra_s
        server, server_e2e = np.full(len(requests), np.nan), np.full(len(requests), np.nan)
        server[requests["ttft_s"].notna().to_numpy()] = server_ttft_s(requests, extra)
        done = ((requests["status"] == "finished") & requests["ttft_s"].notna()).to_numpy()
        server_e2e[done] = server_e2e_s(requests, extra)
        requests = requests.assign(server_ttft_s=server, server_e2e_s=server_e2e)
        ttft = requests["ttft_s"].to_numpy(dtype=np.float64)
        if not any(np.array_equal(ttft, run["ttft_s"].to_numpy(dtype=np.float64), equal_nan=True) for run in runs):
            runs.append(requests)
    return pd.concat(runs, ignore_index=True) if len(runs) > 1 else runs[0]


def run_case(case: Case, base: Path = Path(), max_seeds: int = NUM_SEEDS_RANDOM) -> list[StageResult]:
    if case.skip_reason is not None:
        raise InputError(case.name, "", case.skip_reason)
    requests = simulated_requests(case, base, max_seeds)
    results = []
    for stage in case.stages:
        if case.closed_loop:
            steady = _steady(requests, case.warmup_requests)
            predicted, intervals = _predicted_closed_loop(steady), closed_loop_intervals(steady, stage)
        else:
            window = _stage_window(requests, stage)
            column = "server_ttft_s" if case.server_side else "ttft_s"  # the view the measurement took
            predicted = _predicted_open_loop(window, case.server_side)
            intervals = open_loop_intervals(window, stage, column)
        typical = stage.measured.get("ttft_p50", stage.measured.get("ttft_mean", 0.0))
        measured_over = stage.num_failed > 0 or typical > OVERLOAD_TTFT_S
        predicted_over = predicted.get("aborted_fraction", 0.0) > 0 or predicted["ttft_mean"] > OVERLOAD_TTFT_S
        results.append(
            StageResult(
                case.name,
                stage.label,
                stage.measured,
                predicted,
                measured_over,
                predicted_over,
                intervals,
                measured_client_bound=stage.is_client_bound,
            )
        )
    return results


def check_calibrations(cases: list[Case], base: Path = Path()) -> None:
    """Each deployment calibration file the cases name (engine.calibration, relative to base), read once: a
    truncated, malformed or missing file is the user's input error (one line naming the file and the field,
    exit 2), not a run to skip. Whether it fits a case's hardware stays the case's own question."""
    names = {case.scenario.engine.calibration for case in cases}
    for name in sorted(name for name in names if name is not None):
        load_file(DeploymentCalibration, base / name)


def run_all(
    cases: list[Case],
    base: Path = Path(),
    progress: Callable[[str, int, int], None] | None = None,
    workers: int = 1,
) -> tuple[list[StageResult], list[tuple[str, str]]]:
    """Every case's stages, in the cases' order; a case that cannot be simulated (unknown model, does not fit, ...)
    is listed with its reason instead of stopping the others. A bad calibration file stops them all
    (check_calibrations). `workers` > 1 simulates cases in that many processes (the same results: each case's
    seeds are its own). `progress(phase, done, total)` hears of each case as it starts (one process) or ends."""
    check_calibrations(cases, base)
    results, skipped = [], []
    for case, (stages, reason) in zip(cases, _outcomes(cases, base, progress, workers), strict=True):
        if reason is None:
            results += stages
        else:
            skipped.append((case.name, reason))
    return results, skipped


_PHASE = "simulating the measured runs"


def _stages_or_reason(case: Case, base: Path) -> tuple[list[StageResult], str | None]:
    try:
        return run_case(case, base), None
    except (InputError, DoesNotFitError) as exc:
        return [], str(exc)


def _outcomes(
    cases: list[Case], base: Path, progress: Callable[[str, int, int], None] | None, workers: int
) -> list[tuple[list[StageResult], str | None]]:
    def tick(done: int) -> None:
        if progress is not None:
            progress(_PHASE, done, len(cases))

    workers = usable_workers(workers, len(cases))
    if workers <= 1:
        outcomes = []
        for done, case in enumerate(cases):
            tick(done)
            outcomes.append(_stages_or_reason(case, base))
        return outcomes
    pool = local_pool(workers)
    try:
        futures = [pool.submit(_stages_or_reason, case, base) for case in cases]
        tick(0)
        for done, _ in enumerate(as_completed(futures), start=1):
            tick(done)
        return [future.result() for future in futures]
    finally:
        pool.shutdown(cancel_futures=True)  # after Ctrl-C, queued cases are not run


def metrics_by_kernel_costs(cases: list[Case], base: Path = Path()) -> dict[str, dict[str, Any]]:
    """The per-metric error summary of the same cases with the roofline and with the calibrated curves."""
    return {
        costs: summarize(run_all(with_kernel_costs(cases, costs), base)[0])["metrics"]
        for costs in ("roofline", "calibrated")
    }


def summarize(results: list[StageResult]) -> dict[str, Any]:
    """Median and P90 absolute percentage error per metric over the scored stages (neither overloaded nor
    client-bound), overload detection, and SLO-side agreement of P99 TTFT (client-bound stages left out: their
    P99 is the client's)."""
    normal = [r for r in results if r.is_scored]
    metrics = sorted({k for r in normal for k in r.errors()})
    per_metric = {}
    for metric in metrics:
        errors = [r.errors()[metric] for r in normal if metric in r.errors()]
        per_metric[metric] = {
            "median_ape": statistics.median(errors),
            "p90_ape": percentile(np.asarray(errors, dtype=np.float64), 0.9),
            "max_ape": max(errors),
            "stages": len(errors),
        }
    overloaded = [r for r in results if r.measured_overloaded]
    slo = {}
    for bound in SLOS_S:
        pairs = [
            (r.measured["ttft_p99"], r.predicted["ttft_p99"])
            for r in results
            if "ttft_p99" in r.measured and not r.measured_client_bound
        ]
        agree = sum((m <= bound) == (p <= bound) for m, p in pairs)
        slo[f"{bound:g}s"] = {"agree": agree, "stages": len(pairs)}
    return {
        "stages": len(results),
        "interval_overlap": interval_overlap(normal),
        "overloaded_stages": len(overloaded),
        "overloaded_rule": f"a request failed, or the median TTFT is over {OVERLOAD_TTFT_S:g} s",  # measured
        "overloaded_predicted_overloaded": sum(r.predicted_overloaded for r in overloaded),
        "false_overload": sum(r.predicted_overloaded for r in normal),
        "client_bound_stages": sum(r.measured_client_bound for r in results),
        "metrics": per_metric,
        "p99_slo_agreement": slo,
    }


def interval_overlap(results: list[StageResult]) -> dict[str, Any]:
    """Per metric, how many stages' measured and predicted 95% intervals overlap, of those where both sides
    have one (a measured mean counts as its own point)."""
    metrics = sorted({k for r in results for k, v in r.intervals.items() if v.overlap is not None})
    counts = {}
    for metric in metrics:
        flags = [r.intervals[metric].overlap for r in results if metric in r.intervals]
        known = [flag for flag in flags if flag is not None]
        counts[metric] = {"overlap": sum(known), "stages": len(known)}
    return {"confidence": CONFIDENCE, "metrics": counts}


def as_json(results: list[StageResult], summary: dict[str, Any], skipped: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "stages": [asdict(r) | {"errors": r.errors()} for r in results],
        "summary": summary,
        "skipped": [{"case": name, "reason": reason} for name, reason in skipped],
    }
