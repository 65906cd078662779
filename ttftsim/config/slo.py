"""The SLO block, one schema for the scenario, plan and deployment files: SLOs as users state them.

Statistic targets, `<metric>_<statistic>_s`: TTFT, TPOT, ITL and end-to-end latency, each at its mean, P50,
P90, P95 or P99 (e.g. ttft_p99_s, tpot_mean_s). Percentiles of TTFT, TPOT and end-to-end latency count
every arrival: one never served, or never finished, is infinitely late (metrics/slo.py). Means are over the
requests that have the figure, as `vllm bench serve` reports them (a request never served has no TPOT; the
percentile targets are what catch it). ITL is over every inter-token gap of the run, pooled.

The goodput target is DistServe's (Zhong et al., OSDI 2024, section 2: goodput is the rate served with a
given SLO attainment): `goodput_share` of the arrivals must each meet every per-request target set
(ttft_s, tpot_s, e2e_s), as `vllm bench serve --goodput ttft:.. tpot:.. e2el:..` counts a good request.
Without goodput_share, the per-request targets only count toward `simulate`'s goodput_requests_per_s, which
is null without them (as `vllm bench serve` reports goodput only with --goodput).

`per_priority` sets targets for one priority class of the traffic (the workload's priority 0..n-1).

Every target set decides pass or fail: `simulate`'s exit code, the plan's search, `validate`'s verdict.
"""

from __future__ import annotations

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from ttftsim.config.base import FIELD_ERROR, StrictModel

METRICS = ("ttft", "tpot", "itl", "e2e")
STATISTICS = ("mean", "p50", "p90", "p95", "p99")
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
TARGETS = tuple(f"{metric}_{statistic}_s" for metric in METRICS for statistic in STATISTICS)
PER_REQUEST_TARGETS = ("ttft_s", "tpot_s", "e2e_s")
# a target at or above this, in seconds, is more likely milliseconds written as seconds: said, not refused
PLAUSIBLE_S = {"ttft": 60.0, "tpot": 5.0, "itl": 5.0, "e2e": 3600.0}


def _target(metric: str, statistic: str) -> float | None:
    level = "mean" if statistic == "mean" else statistic.upper()
    whole = {"ttft": "time to first token", "tpot": "time per output token", "itl": "inter-token latency"}
    return Field(default=None, gt=0, description=f"{level} {whole.get(metric, 'end-to-end latency')}, seconds")


class Targets(StrictModel):
    """Targets one set of requests must meet: statistic targets, and the goodput target."""

    ttft_mean_s: float | None = _target("ttft", "mean")
    ttft_p50_s: float | None = _target("ttft", "p50")
    ttft_p90_s: float | None = _target("ttft", "p90")
    ttft_p95_s: float | None = _target("ttft", "p95")
    ttft_p99_s: float | None = Field(
        default=None, gt=0, description="P99 time to first token over every arrival, seconds (deploy: required)"
    )
    tpot_mean_s: float | None = _target("tpot", "mean")
    tpot_p50_s: float | None = _target("tpot", "p50")
    tpot_p90_s: float | None = _target("tpot", "p90")
    tpot_p95_s: float | None = _target("tpot", "p95")
    tpot_p99_s: float | None = _target("tpot", "p99")
    itl_mean_s: float | None = _target("itl", "mean")
    itl_p50_s: float | None = _target("itl", "p50")
    itl_p90_s: float | None = _target("itl", "p90")
    itl_p95_s: float | None = _target("itl", "p95")
    itl_p99_s: float | None = _target("itl", "p99")
    e2e_mean_s: float | None = _target("e2e", "mean")
    e2e_p50_s: float | None = _target("e2e", "p50")
    e2e_p90_s: float | None = _target("e2e", "p90")
    e2e_p95_s: float | None = _target("e2e", "p95")
    e2e_p99_s: float | None = _target("e2e", "p99")
    ttft_s: float | None = Field(default=None, gt=0, description="Per-request TTFT target of a good request, seconds")
    tpot_s: float | None = Field(default=None, gt=0, description="Per-request TPOT target of a good request, seconds")
    e2e_s: float | None = Field(
        default=None, gt=0, description="Per-request end-to-end target of a good request, seconds"
    )
    goodput_share: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="Share of arrivals that must meet every per-request target (ttft_s, tpot_s, e2e_s): "
        "DistServe's SLO attainment, e.g. 0.99",
    )

    @model_validator(mode="after")
    def _goodput_needs_targets(self) -> Targets:
        if self.goodput_share is not None and not self.per_request_targets():
            raise ValueError(
                f"goodput_share ({self.goodput_share:g}) needs a per-request target: ttft_s, tpot_s or e2e_s"
            )
        return self

    def statistic_targets(self) -> dict[str, float]:
        """The statistic targets that are set, by name, in TARGETS order."""
        targets = {name: getattr(self, name) for name in TARGETS}
        return {name: value for name, value in targets.items() if value is not None}

    def percentile_targets(self) -> dict[str, float]:
        """The statistic targets that are set (the name they had when only percentiles were)."""
        return self.statistic_targets()

    def per_request_targets(self) -> dict[str, float]:
        targets = {name: getattr(self, name) for name in PER_REQUEST_TARGETS}
        return {name: value for name, value in targets.items() if value is not None}

    def is_judged(self) -> bool:
        """Whether any target decides pass or fail (per-request targets alone only count goodput)."""
        return bool(self.statistic_targets()) or self.goodput_share is not None


class Slo(Targets):
    """Targets of a run (scenario, plan and deployment files alike), and targets per priority class."""

    per_priority: dict[int, Targets] = Field(
        default_factory=dict,
        description="Targets for the requests of one priority (the workload's priority_levels: 0..n-1); "
        "ITL targets cannot be set per class (gaps are pooled over the run)",
    )

    @model_validator(mode="after")
    def _classes(self) -> Slo:
        for priority, targets in self.per_priority.items():
            itl = [name for name in targets.statistic_targets() if name.startswith("itl_")]
            if priority < 0:
                why = "a priority is 0 or more"
            elif itl:
                why = f"{', '.join(itl)} cannot be judged per class (inter-token gaps are pooled over the run); set it "
                why += "at the top level"
            elif not targets.is_judged():
                why = "sets no target that is judged"
            elif targets.per_request_targets() and targets.goodput_share is None:
                why = "per-request targets are judged only with goodput_share"
            else:
                continue
            raise PydanticCustomError(FIELD_ERROR, why, {"field": f"per_priority.{priority}"})
        return self

    def is_judged(self) -> bool:
        return super().is_judged() or bool(self.per_priority)


def check_classes(slo: Slo, levels: int, workload: str) -> None:
    """Each class slo.per_priority names is one the traffic has (priorities 0..levels-1): targets for a class no
    request is in could never be judged (a run would fail them with no figure), so they are an input error."""
    for priority in sorted(slo.per_priority):
        if priority >= levels:
            raise PydanticCustomError(
                FIELD_ERROR,
                "{workload} has priorities 0..{last} (priority_levels {levels})"
                if levels > 1
                else "{workload} has one priority, 0 (priority_levels 1)",
                {"field": f"slo.per_priority.{priority}", "workload": workload, "last": levels - 1, "levels": levels},
            )


def unit_warnings(slo: Slo | None) -> list[str]:
    """A warning per target so large it was likely meant in milliseconds (PLAUSIBLE_S): a TTFT target of 500
    is 500 seconds, and every run meets it."""
    if slo is None:
        return []
    sets = [("slo", slo)] + [(f"slo.per_priority.{p}", targets) for p, targets in slo.per_priority.items()]
    found = []
    for where, targets in sets:
        for name, value in (targets.statistic_targets() | targets.per_request_targets()).items():
            if value >= PLAUSIBLE_S[name.split("_")[0]]:
                found.append(
                    f"{where}.{name} is {value:g} s: targets are in seconds ({value:g} ms would be {value / 1e3:g}); "
                    "almost any run meets it"
                )
    return found


def percentile_slo(slo: Slo, what: str) -> Slo:
    """The SLO of a deployment file (`what`): ttft_p99_s set; per-request targets only with goodput_share."""
    if slo.ttft_p99_s is None:
        raise ValueError(f"ttft_p99_s is required: {what} is judged by its P99 TTFT over every arrival")
    return judged_slo(slo, what)


def judged_slo(slo: Slo, what: str) -> Slo:
    """The SLO of a plan (`what`): at least one judged target; per-request targets only inside a goodput
    target (goodput_share), which is what would judge them."""
    if not slo.is_judged():
        raise ValueError(f"{what} needs a target to meet: a statistic target (e.g. ttft_p99_s) or goodput_share")
    given = slo.per_request_targets()
    if given and slo.goodput_share is None:
        raise ValueError(
            f"{' and '.join(given)} ({', '.join(f'{v:g}' for v in given.values())}) are per-request targets; "
            f"{what} judges them only with goodput_share (e.g. 0.99), or use a statistic target such as ttft_p99_s"
        )
    return slo
