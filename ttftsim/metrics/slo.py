"""The SLO figures of a run over every arrival (a request that never got a first token, or never finished,
counts as infinitely late), and the verdict against an SLO's percentile targets: what the plan's search,
`validate`'s prediction and `simulate`'s summary (and exit code) all judge a run by. The percentiles are
metrics/percentiles.py's slo_percentile (the inverted empirical CDF; that module says why)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from ttftsim.config.slo import PERCENTILE_TARGETS, Slo
from ttftsim.metrics.percentiles import slo_percentile


@dataclass(frozen=True)
class SloFigures:
    """Percentiles over every arrival, seconds (inf when too few arrivals were served, or none arrived),
    and output tokens per unit of the plan's rate. Each percentile is named as the SLO target it meets."""

    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    e2e_p99_s: float
    output_tokens_per_unit: float

    def meets(self, slo: Slo) -> bool:
        """Every percentile target the SLO sets is met (an SLO without one is met)."""
        return all(self.figure(name) <= target for name, target in slo.percentile_targets().items())

    def figure(self, target: str) -> float:
        """The figure a percentile target (config/slo.py PERCENTILE_TARGETS) is judged against."""
        value: float = getattr(self, target)
        return value

    def as_dict(self) -> dict[str, float]:
        """Plain values (the plan's checkpoint, `validate --json`'s prediction)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SloFigures:
        """From as_dict's values (other keys beside them are left alone)."""
        return cls(**{name: float(data[name]) for name in cls.__dataclass_fields__})


def slo_figures(requests: pd.DataFrame) -> SloFigures:
    """Percentiles over every arrival (inf for one that never got a first token or never finished)."""
    if not len(requests):
        return SloFigures(math.inf, math.inf, math.inf, math.inf, math.inf, 0.0)
    ttft = requests["ttft_s"].fillna(np.inf).to_numpy(dtype=np.float64)
    tpot = requests["tpot_s"].to_numpy(dtype=np.float64)
    finished = requests["status"].to_numpy() == "finished"
    tpot = np.where(finished, np.nan_to_num(tpot, nan=0.0), np.inf)
    e2e = requests["e2e_s"].fillna(np.inf).to_numpy(dtype=np.float64)
    return SloFigures(
        ttft_p50_s=slo_percentile(ttft, 0.5),
        ttft_p90_s=slo_percentile(ttft, 0.9),
        ttft_p99_s=slo_percentile(ttft, 0.99),
        tpot_p99_s=slo_percentile(tpot, 0.99),
        e2e_p99_s=slo_percentile(e2e, 0.99),
        output_tokens_per_unit=_tokens_per_unit(requests[requests["status"] == "finished"]),
    )


def _tokens_per_unit(requests: pd.DataFrame) -> float:
    """Output tokens of served requests per unit of the plan's rate: per request, or per session for
    conversations (whose rate is in sessions/s; every turn's tokens count toward its session)."""
    sessions = requests["session_id"]
    units = sessions[sessions >= 0].nunique() + int((sessions < 0).sum())
    return float(requests["generated_tokens"].sum()) / units if units else 0.0


@dataclass(frozen=True)
class SloCheck:
    """One percentile target and the run's figure for it (inf: too few arrivals served; None: no arrivals,
    nothing to judge, so not met)."""

    target: str  # its name in the SLO block, e.g. ttft_p99_s
    target_s: float
    figure_s: float | None

    @property
    def is_met(self) -> bool:
        return self.figure_s is not None and self.figure_s <= self.target_s


@dataclass(frozen=True)
class SloVerdict:
    """A run against its SLO's percentile targets, in the SLO block's order; met iff every check is."""

    checks: tuple[SloCheck, ...]

    @property
    def met(self) -> bool:
        return all(check.is_met for check in self.checks)

    def to_json(self) -> dict[str, Any]:
        """summary.json's `slo`: each target by its name, its figure (infinite: "inf"), and met."""
        data: dict[str, Any] = {}
        for check in self.checks:
            figure = check.figure_s
            data[check.target] = check.target_s
            data[figure_key(check.target)] = "inf" if figure is not None and not math.isfinite(figure) else figure
        return data | {"met": self.met}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SloVerdict:
        checks = []
        for target in (name for name in PERCENTILE_TARGETS if name in data):
            figure = data[figure_key(target)]
            value = None if figure is None else math.inf if figure == "inf" else float(figure)
            checks.append(SloCheck(target, float(data[target]), value))
        return cls(tuple(checks))


def figure_key(target: str) -> str:
    """The summary key of a target's figure: p99_counting_unserved_s for ttft_p99_s (its name since the
    first SLO block), <target without _s>_counting_unserved_s for the others."""
    return "p99_counting_unserved_s" if target == "ttft_p99_s" else f"{target.removesuffix('_s')}_counting_unserved_s"


def judge(slo: Slo, figures: SloFigures | None) -> SloVerdict | None:
    """The verdict on the SLO's percentile targets (figures None: the run had no arrivals); None when the
    SLO sets no percentile target."""
    targets = slo.percentile_targets()
    if not targets:
        return None
    return SloVerdict(
        tuple(
            SloCheck(name, target, None if figures is None else figures.figure(name))
            for name, target in targets.items()
        )
    )
