"""The SLO block, one schema for the scenario, plan and deployment files.

Percentile targets (ttft_p99_s, ttft_p90_s, tpot_p99_s, e2e_p99_s) are judged over every arrival: a
request never served, or never finished, counts as infinitely late (metrics/slo.py). They decide pass or
fail: `simulate`'s exit code, the plan's search, `validate`'s verdict. Per-request targets (ttft_s, tpot_s)
decide which finished requests count toward goodput, which only `simulate` reports; a plan or a deployment
file needs ttft_p99_s and refuses per-request targets rather than ignore them.
"""

from __future__ import annotations

from pydantic import Field

from ttftsim.config.base import StrictModel

PERCENTILE_TARGETS = ("ttft_p99_s", "ttft_p90_s", "tpot_p99_s", "e2e_p99_s")
PER_REQUEST_TARGETS = ("ttft_s", "tpot_s")


class Slo(StrictModel):
    """Targets of a run (scenario, plan and deployment files alike). Percentile targets count every arrival
    (one never served is late) and decide pass/fail; per-request targets decide goodput (simulate only).
    A plan or deployment file needs ttft_p99_s and takes percentile targets only."""

    ttft_p99_s: float | None = Field(
        default=None, gt=0, description="P99 time to first token over every arrival, seconds (plan, deploy: required)"
    )
    ttft_p90_s: float | None = Field(default=None, gt=0, description="P90 time to first token, seconds")
    tpot_p99_s: float | None = Field(default=None, gt=0, description="P99 time per output token, seconds")
    e2e_p99_s: float | None = Field(default=None, gt=0, description="P99 end-to-end latency, seconds")
    ttft_s: float | None = Field(
        default=None, gt=0, description="Per-request TTFT target for goodput, seconds (scenario files only)"
    )
    tpot_s: float | None = Field(
        default=None, gt=0, description="Per-request TPOT target for goodput, seconds (scenario files only)"
    )

    def percentile_targets(self) -> dict[str, float]:
        """The percentile targets that are set, by name, in PERCENTILE_TARGETS order."""
        targets = {name: getattr(self, name) for name in PERCENTILE_TARGETS}
        return {name: value for name, value in targets.items() if value is not None}


def percentile_slo(slo: Slo, what: str) -> Slo:
    """The SLO of a plan or deployment file (`what`): ttft_p99_s set, no per-request targets."""
    if slo.ttft_p99_s is None:
        raise ValueError(f"ttft_p99_s is required: {what} is judged by its P99 TTFT over every arrival")
    given = [name for name in PER_REQUEST_TARGETS if getattr(slo, name) is not None]
    if given:
        raise ValueError(
            f"{' and '.join(given)} ({', '.join(f'{getattr(slo, n):g}' for n in given)}) are per-request goodput "
            f"targets, which only simulate reports; {what} takes {', '.join(PERCENTILE_TARGETS)}"
        )
    return slo
