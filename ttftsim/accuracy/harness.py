"""Simulate every ground-truth case and compare predictions with measurements, stage by stage.

A stage is overloaded when the client saw failures (timeouts) or a median TTFT above 10 s; error
statistics are taken over the other stages, and overloaded ones are checked for being predicted as
overloaded. SLO agreement: whether predicted and measured P99 TTFT fall on the same side of each SLO.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ttftsim.accuracy.ground_truth import Case, StageTruth, with_kernel_costs
from ttftsim.errors import InputError
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.simulate import simulate

SLOS_S = (0.2, 0.5, 1.0, 2.0)
OVERLOAD_TTFT_S = 10.0


@dataclass(frozen=True)
class StageResult:
    case: str
    stage: str
    measured: dict[str, float]
    predicted: dict[str, float]
    measured_overloaded: bool
    predicted_overloaded: bool

    def errors(self) -> dict[str, float]:
        """Absolute percentage error per metric both sides have."""
        return {
            k: abs(self.predicted[k] - v) / v
            for k, v in self.measured.items()
            if k in self.predicted and v and np.isfinite(self.predicted[k])
        }


def _predicted_open_loop(requests: pd.DataFrame, stage: StageTruth, output_len: int) -> dict[str, float]:
    window = requests[(requests["arrival_s"] >= stage.start_s) & (requests["arrival_s"] < stage.end_s)]
    done = window[window["status"] == "finished"]
    if len(done) == 0:
        return {
            "ttft_mean": float("inf"),
            "ttft_p50": float("inf"),
            "ttft_p90": float("inf"),
            "ttft_p99": float("inf"),
            "aborted_fraction": 1.0,
        }
    ttft = done["ttft_s"].to_numpy()
    return {
        "ttft_mean": float(ttft.mean()),
        "ttft_p50": float(np.quantile(ttft, 0.5)),
        "ttft_p90": float(np.quantile(ttft, 0.9)),
        "ttft_p99": float(np.quantile(ttft, 0.99)),
        "tpot_p50": float(done["tpot_s"].median()),
        "e2e_p50": float(done["e2e_s"].median()),
        "aborted_fraction": float((window["status"] == "aborted").mean()),
    }


def _predicted_closed_loop(requests: pd.DataFrame, warmup: int) -> dict[str, float]:
    steady = requests[(requests["request_id"] >= warmup) & (requests["status"] == "finished")]
    return {"ttft_mean": float(steady["ttft_s"].mean()), "tpot_mean": float(steady["tpot_s"].mean())}


def run_case(case: Case, base: Path = Path()) -> list[StageResult]:
    result = simulate(case.scenario, base, source=case.name)
    requests = result.requests
    results = []
    for stage in case.stages:
        if case.closed_loop:
            predicted = _predicted_closed_loop(requests, case.warmup_requests)
        else:
            output_len = int(getattr(case.scenario.workload, "output_len", 1))
            predicted = _predicted_open_loop(requests, stage, output_len)
        typical = stage.measured.get("ttft_p50", stage.measured.get("ttft_mean", 0.0))
        measured_over = stage.num_failed > 0 or typical > OVERLOAD_TTFT_S
        predicted_over = predicted.get("aborted_fraction", 0.0) > 0 or predicted["ttft_mean"] > OVERLOAD_TTFT_S
        results.append(StageResult(case.name, stage.label, stage.measured, predicted, measured_over, predicted_over))
    return results


def run_all(cases: list[Case], base: Path = Path()) -> tuple[list[StageResult], list[tuple[str, str]]]:
    """Every case's stages; a case that cannot be simulated (unknown model, does not fit, ...) is listed
    with its reason instead of stopping the others."""
    results, skipped = [], []
    for case in cases:
        try:
            results += run_case(case, base)
        except (InputError, DoesNotFitError) as exc:
            skipped.append((case.name, str(exc)))
    return results, skipped


def metrics_by_kernel_costs(cases: list[Case], base: Path = Path()) -> dict[str, dict[str, Any]]:
    """The per-metric error summary of the same cases with the roofline and with the calibrated curves."""
    return {
        costs: summarize(run_all(with_kernel_costs(cases, costs), base)[0])["metrics"]
        for costs in ("roofline", "calibrated")
    }


def summarize(results: list[StageResult]) -> dict[str, Any]:
    """Median and P90 absolute percentage error per metric over non-overloaded stages, overload
    detection, and SLO-side agreement of P99 TTFT."""
    normal = [r for r in results if not r.measured_overloaded]
    metrics = sorted({k for r in normal for k in r.errors()})
    per_metric = {}
    for metric in metrics:
        errors = [r.errors()[metric] for r in normal if metric in r.errors()]
        per_metric[metric] = {
            "median_ape": statistics.median(errors),
            "p90_ape": float(np.quantile(errors, 0.9)),
            "max_ape": max(errors),
            "stages": len(errors),
        }
    overloaded = [r for r in results if r.measured_overloaded]
    slo = {}
    for bound in SLOS_S:
        pairs = [(r.measured["ttft_p99"], r.predicted["ttft_p99"]) for r in results if "ttft_p99" in r.measured]
        agree = sum((m <= bound) == (p <= bound) for m, p in pairs)
        slo[f"{bound:g}s"] = {"agree": agree, "stages": len(pairs)}
    return {
        "stages": len(results),
        "overloaded_stages": len(overloaded),
        "overloaded_predicted_overloaded": sum(r.predicted_overloaded for r in overloaded),
        "false_overload": sum(r.predicted_overloaded for r in normal),
        "metrics": per_metric,
        "p99_slo_agreement": slo,
    }


def as_json(results: list[StageResult], summary: dict[str, Any], skipped: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "stages": [asdict(r) | {"errors": r.errors()} for r in results],
        "summary": summary,
        "skipped": [{"case": name, "reason": reason} for name, reason in skipped],
    }
