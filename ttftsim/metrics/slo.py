"""The SLO figures of a run and its verdict against an SLO (config/slo.py): what the plan's search,
`validate`'s prediction and `simulate`'s summary (and exit code) all judge a run by.

Figures, for each of TTFT, TPOT, ITL and end-to-end latency: the mean, P50, P90, P95 and P99.
- Percentiles are metrics/percentiles.py's slo_percentile (the inverted empirical CDF; that module says
  why) over every arrival: a request that never got a first token, or never finished, is infinitely late.
  TPOT of a finished one-token request is 0 (it waited for no second token).
- Means are over the requests that have the figure, as `vllm bench serve` reports them
  (vllm/benchmarks/serve.py, calculate_metrics: TTFT of every completed request, TPOT of those with more
  than one output token, end-to-end latency of every completed request); inf when none has it.
- ITL is over every inter-token gap of the run, pooled across requests as vLLM's benchmark pools them
  (the same calculate_metrics extends one list with each request's gaps); inf when there is none.
- goodput_share: the share of arrivals that finished meeting every per-request target (ttft_s, tpot_s,
  e2e_s), DistServe's SLO attainment; NaN when the SLO sets no per-request target.
Figures per priority class are those of the class's requests alone (ITL is not split: gaps are pooled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ttftsim.config.slo import QUANTILES, TARGETS, Slo, Targets
from ttftsim.metrics.percentiles import WeightedSamples, slo_percentile

Gaps = tuple[NDArray[np.float64], NDArray[Any]]  # inter-token gap values and their integer weights


@dataclass(frozen=True)
class SloFigures:
    """A run's figure for every target an SLO can set, seconds (inf: nothing to judge by, or too few served),
    the goodput share, output tokens per unit of the plan's rate, and the same per priority class asked for.
    Each figure is named as the target it meets."""

    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p95_s: float
    ttft_p99_s: float
    tpot_mean_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p95_s: float
    tpot_p99_s: float
    itl_mean_s: float
    itl_p50_s: float
    itl_p90_s: float
    itl_p95_s: float
    itl_p99_s: float
    e2e_mean_s: float
    e2e_p50_s: float
    e2e_p90_s: float
    e2e_p95_s: float
    e2e_p99_s: float
    goodput_share: float
    output_tokens_per_unit: float  # served, per request or session (validate --json); plans price at the demand
    per_priority: dict[int, SloFigures] = field(default_factory=dict)

    def meets(self, slo: Slo) -> bool:
        """Every target the SLO sets is met (an SLO without one is met)."""
        verdict = judge(slo, self)
        return verdict is None or verdict.met

    def figure(self, target: str) -> float:
        """The figure a target (config/slo.py TARGETS, or goodput_share) is judged against."""
        value: float = getattr(self, target)
        return value

    def as_dict(self) -> dict[str, Any]:
        """Plain values (the plan's checkpoint, `validate --json`'s prediction); classes under per_priority."""
        data: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "per_priority"}
        if self.per_priority:
            data["per_priority"] = {str(k): v.as_dict() for k, v in sorted(self.per_priority.items())}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SloFigures:
        """From as_dict's values (other keys beside them are left alone)."""
        values = {f.name: float(data[f.name]) for f in fields(cls) if f.name != "per_priority"}
        classes = {int(k): cls.from_dict(v) for k, v in (data.get("per_priority") or {}).items()}
        return cls(**values, per_priority=classes)


def slo_figures(requests: pd.DataFrame, slo: Targets | None = None, gaps: Gaps | None = None) -> SloFigures:
    """The figures of a run's requests (every arrival) and its inter-token gaps (None: none recorded, ITL
    figures inf); goodput_share against the SLO's per-request targets; each class slo.per_priority names."""
    none = np.zeros(0, dtype=np.float64)
    values, weights = gaps if gaps is not None else (none, none)
    figures = _figures(requests, slo, values, weights)
    if isinstance(slo, Slo) and slo.per_priority:
        classes = {
            k: _figures(requests[requests["priority"] == k], targets, none, none)
            for k, targets in sorted(slo.per_priority.items())
        }
        figures = SloFigures(**{**_plain(figures), "per_priority": classes})
    return figures


def _plain(figures: SloFigures) -> dict[str, Any]:
    return {f.name: getattr(figures, f.name) for f in fields(figures) if f.name != "per_priority"}


def _figures(
    requests: pd.DataFrame, slo: Targets | None, gap_values: NDArray[np.float64], gap_weights: NDArray[Any]
) -> SloFigures:
    finished = requests["status"].to_numpy() == "finished"
    ttft = requests["ttft_s"].fillna(np.inf).to_numpy(dtype=np.float64)
    tpot_raw = requests["tpot_s"].to_numpy(dtype=np.float64)
    tpot = np.where(finished, np.nan_to_num(tpot_raw, nan=0.0), np.inf)
    e2e = requests["e2e_s"].fillna(np.inf).to_numpy(dtype=np.float64)
    means = {
        "ttft": _mean(ttft[np.isfinite(ttft)]),
        "tpot": _mean(tpot_raw[finished & np.isfinite(tpot_raw)]),
        "e2e": _mean(e2e[finished & np.isfinite(e2e)]),
        "itl": float(np.average(gap_values, weights=gap_weights)) if gap_weights.sum() > 0 else math.inf,
    }
    values: dict[str, Any] = {}
    gaps = WeightedSamples(gap_values, gap_weights)  # sorted once for every level
    for metric, samples in (("ttft", ttft), ("tpot", tpot), ("e2e", e2e), ("itl", None)):
        values[f"{metric}_mean_s"] = means[metric]
        for level, q in QUANTILES.items():
            if samples is None:
                values[f"{metric}_{level}_s"] = gaps.slo_percentile(q)
            else:
                values[f"{metric}_{level}_s"] = slo_percentile(samples, q) if len(samples) else math.inf
    per_request = slo.per_request_targets() if slo is not None else {}
    share = float(good_requests(requests, slo).mean()) if per_request and len(requests) else math.nan
    return SloFigures(
        **{name: values[name] for name in TARGETS},
        goodput_share=share,
        output_tokens_per_unit=_tokens_per_unit(requests[finished]),
    )


def _mean(values: NDArray[np.float64]) -> float:
    return float(values.mean()) if len(values) else math.inf


def good_requests(requests: pd.DataFrame, slo: Targets | None) -> pd.Series:
    """Which requests finished meeting every per-request target (a one-token request's TPOT counts as 0)."""
    ok = requests["status"] == "finished"
    if slo is None:
        return ok
    if slo.ttft_s is not None:
        ok &= requests["ttft_s"] <= slo.ttft_s
    if slo.tpot_s is not None:
        ok &= requests["tpot_s"].fillna(0.0) <= slo.tpot_s
    if slo.e2e_s is not None:
        ok &= requests["e2e_s"] <= slo.e2e_s
    return ok


def _tokens_per_unit(requests: pd.DataFrame) -> float:
    """Output tokens of served requests per unit of the plan's rate: per request, or per session for
    conversations (whose rate is in sessions/s; every turn's tokens count toward its session)."""
    sessions = requests["session_id"]
    units = sessions[sessions >= 0].nunique() + int((sessions < 0).sum())
    return float(requests["generated_tokens"].sum()) / units if units else 0.0


@dataclass(frozen=True)
class SloCheck:
    """One target and the run's figure for it (inf: too few arrivals served; None: no arrivals, nothing to
    judge, so not met). A time target is met at or below it; goodput_share (a share) at or above it."""

    target: str  # its name in the SLO block, e.g. ttft_p99_s, tpot_mean_s, goodput_share
    target_s: float  # seconds; for goodput_share, the share
    figure_s: float | None
    priority: int | None = None  # the priority class it judges (None: every request)

    @property
    def is_met(self) -> bool:
        if self.figure_s is None or self.figure_s != self.figure_s:
            return False
        if self.target == "goodput_share":
            return self.figure_s >= self.target_s
        return self.figure_s <= self.target_s

    @property
    def ratio(self) -> float:
        """How close the figure is to its target: 1 at the target, above 1 when missed (inf: no figure)."""
        if self.figure_s is None or self.figure_s != self.figure_s:
            return math.inf
        if self.target == "goodput_share":  # the share of late arrivals against the share allowed late
            allowed = 1.0 - self.target_s
            late = 1.0 - self.figure_s
            return late / allowed if allowed > 0 else (0.0 if late <= 0 else math.inf)
        return self.figure_s / self.target_s


@dataclass(frozen=True)
class SloVerdict:
    """A run against its SLO's targets, in the SLO block's order (classes last); met iff every check is."""

    checks: tuple[SloCheck, ...]

    @property
    def met(self) -> bool:
        return all(check.is_met for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        """summary.json's `slo`: each target by its name, its figure (infinite: "inf"), and met; each
        priority class's the same under per_priority."""
        data = _checks_json([c for c in self.checks if c.priority is None])
        classes = sorted({c.priority for c in self.checks if c.priority is not None})
        if classes:
            data["per_priority"] = {str(k): _checks_json([c for c in self.checks if c.priority == k]) for k in classes}
        return data | {"met": self.met}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SloVerdict:
        checks = _checks_from_json(data, None)
        for key, part in (data.get("per_priority") or {}).items():
            checks += _checks_from_json(part, int(key))
        return cls(tuple(checks))


def _checks_json(checks: list[SloCheck]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for check in checks:
        figure = check.figure_s
        data[check.target] = check.target_s
        data[figure_key(check.target)] = "inf" if figure is not None and not math.isfinite(figure) else figure
    if checks and checks[0].priority is not None:
        data["met"] = all(c.is_met for c in checks)
    return data


def _checks_from_json(data: dict[str, Any], priority: int | None) -> list[SloCheck]:
    checks = []
    for target in (name for name in (*TARGETS, "goodput_share") if name in data):
        figure = data[figure_key(target)]
        value = None if figure is None else math.inf if figure == "inf" else float(figure)
        checks.append(SloCheck(target, float(data[target]), value, priority))
    return checks


def figure_key(target: str) -> str:
    """The summary key of a target's figure: p99_counting_unserved_s for ttft_p99_s (its name since the
    first SLO block); <metric>_mean_of_served_s for a mean, itl_<level>_of_gaps_s for ITL,
    goodput_share_achieved, and <target without _s>_counting_unserved_s for the other percentiles."""
    if target == "ttft_p99_s":
        return "p99_counting_unserved_s"
    if target == "goodput_share":
        return "goodput_share_achieved"
    stem = target.removesuffix("_s")
    if stem.endswith("_mean"):
        return f"{stem}_of_served_s"
    if stem.startswith("itl_"):
        return f"{stem}_of_gaps_s"
    return f"{stem}_counting_unserved_s"


def judge(slo: Slo, figures: SloFigures | None) -> SloVerdict | None:
    """The verdict on the SLO's targets (figures None: the run had no arrivals); None when the SLO sets no
    target that is judged."""
    if not slo.is_judged():
        return None
    checks = _checks(slo, figures, None)
    for k, targets in sorted(slo.per_priority.items()):
        checks += _checks(targets, None if figures is None else figures.per_priority.get(k), k)
    return SloVerdict(tuple(checks))


def _checks(targets: Targets, figures: SloFigures | None, priority: int | None) -> list[SloCheck]:
    named = dict(targets.statistic_targets())
    if targets.goodput_share is not None:
        named["goodput_share"] = targets.goodput_share
    return [
        SloCheck(name, target, None if figures is None else figures.figure(name), priority)
        for name, target in named.items()
    ]
