"""What one benchmark report says about one run, before it becomes a case: how the client sent its requests
(the load, and per request what was logged) and what it measured.

Measured values use the harness's names, in seconds: ttft_mean, ttft_p50, ttft_p90, ttft_p99, tpot_p50,
tpot_mean, e2e_p50 (others a report has, such as Prometheus's queue time, ride along for --json). TPOT is
(end-to-end - TTFT) / (output tokens - 1) per request, as vLLM's benchmark, aiperf's inter-token latency and
ttftsim define it (GuideLLM calls it ITL; its own TPOT divides the whole latency). Percentiles of per-request
values are numpy's linear ones, as the tools report them; every order statistic becomes a reported level,
so the measured 95% interval of a percentile is exact (metrics/intervals.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal

import numpy as np

from ttftsim.accuracy.ground_truth import StageTruth
from ttftsim.accuracy.reports.fields import Fields
from ttftsim.config.scenario import ClientTool

Process = Literal["poisson", "constant", "gamma"]
QUANTILES = {"ttft_p50": 0.5, "ttft_p90": 0.9, "ttft_p99": 0.99}


@dataclass(frozen=True)
class Load:
    """How the client sent requests: open loop at rate_per_s (an arrival process; cv for gamma), or closed
    loop with `concurrency` clients. Exactly one of the two is set. warmup_requests went before the measured
    ones and are not in the measurements."""

    rate_per_s: float | None = None
    process: Process = "poisson"
    cv: float = 1.0
    concurrency: int | None = None
    warmup_requests: int = 0

    def label(self) -> str:
        return f"c={self.concurrency}" if self.concurrency is not None else f"{self.rate_per_s:g} req/s"


@dataclass(frozen=True)
class Sent:
    """The measured requests as sent, in the same order: prompt and output tokens (empty when the report has
    only totals) and, for an open loop whose send times were logged, each send from the first (else empty)."""

    prompt_tokens: tuple[int, ...] = ()
    output_tokens: tuple[int, ...] = ()
    send_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class MeasuredRun:
    """One run of a report. load None: the report does not say how requests were sent (a server's metrics);
    the deployment file's workload is used. truth holds the measured values and the request counts."""

    name: str
    tool: ClientTool
    model: str
    load: Load | None
    sent: Sent
    mean_prompt_tokens: float
    mean_output_tokens: float
    truth: StageTruth
    dataset_entries: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    problem: str | None = None  # why the run cannot be simulated (the case is listed as skipped)
    # Several load stages sent back to back (inference-perf): each compared over its own window; the
    # workload's arrivals (a `stages` arrivals mapping) and, for a shared-prefix data set, that workload's
    # fields. Empty / None: the one stage `truth`, the arrivals of `load`.
    stages: tuple[StageTruth, ...] = ()
    arrivals: dict[str, Any] | None = None
    shared_prefix: dict[str, Any] | None = None
    # The measured TTFT and end-to-end latency are vLLM's own histograms (from the engine's arrival to the output
    # handler's first and last token), not a client's: compared with the simulated server view
    # (metrics/prometheus.py server_ttft_s, server_e2e_s).
    server_side: bool = False


def replay_load(send_s: Sequence[float]) -> Load:
    """An open loop replayed at its logged send times, labelled by its mean rate (1 req/s with one send)."""
    span = max(send_s, default=0.0) - min(send_s, default=0.0)
    return Load(rate_per_s=round((len(send_s) - 1) / span, 3) if span > 0 else 1.0)


def levels_of(values: Sequence[float]) -> dict[float, float]:
    """Every order statistic as a reported level: the k-th smallest of n at level k / (n - 1)."""
    ordered = sorted(values)
    if len(ordered) < 2:
        return {}
    return {k / (len(ordered) - 1): v for k, v in enumerate(ordered)}


def tpot_values(ttft_s: Sequence[float], e2e_s: Sequence[float], output_tokens: Sequence[int]) -> list[float]:
    """(end-to-end - TTFT) / (output - 1) of each request with at least two output tokens."""
    return [(e - t) / (n - 1) for t, e, n in zip(ttft_s, e2e_s, output_tokens, strict=True) if n > 1]


LATE_READ_S = 0.001  # a first token timed within 1 ms of the last: read with it (a decode step takes longer)


def late_first_tokens(ttft_s: Sequence[float], e2e_s: Sequence[float], output_tokens: Sequence[int]) -> tuple[int, int]:
    """(requests whose first token the client timed with their last, requests of two or more output tokens):
    of the latter, those whose end-to-end latency exceeds their TTFT by less than LATE_READ_S."""
    multi = [(t, e) for t, e, n in zip(ttft_s, e2e_s, output_tokens, strict=True) if n > 1]
    return sum(e - t < LATE_READ_S for t, e in multi), len(multi)


def truth_from_requests(
    label: str, ttft_s: Sequence[float], e2e_s: Sequence[float], output_tokens: Sequence[int], num_failed: int
) -> StageTruth:
    """Mean and percentiles of the successful requests' own values, and the first tokens timed with the last."""
    ttft = np.asarray(ttft_s, dtype=np.float64)
    measured: dict[str, float] = {}
    if len(ttft):
        measured["ttft_mean"] = float(ttft.mean())
        measured |= {name: float(np.quantile(ttft, q)) for name, q in QUANTILES.items()}
        measured["e2e_p50"] = float(np.median(np.asarray(e2e_s, dtype=np.float64)))
    tpot = tpot_values(ttft_s, e2e_s, output_tokens)
    if tpot:
        measured["tpot_p50"] = float(np.median(tpot))
        measured["tpot_mean"] = float(np.mean(tpot))
    late, multi = late_first_tokens(ttft_s, e2e_s, output_tokens)
    return StageTruth(
        label,
        0.0,
        float("inf"),
        measured,
        num_failed,
        levels_of(ttft_s),
        len(ttft),
        tuple(float(t) for t in ttft),
        late,
        multi,
    )


def reported_truth(
    label: str, measured: dict[str, float], ttft_levels_s: dict[float, float], num_succeeded: int, num_failed: int
) -> StageTruth:
    """A stage from the statistics a report publishes (no per-request values)."""
    return StageTruth(label, 0.0, float("inf"), measured, num_failed, ttft_levels_s, num_succeeded)


def mean_or_zero(values: Sequence[int]) -> float:
    return float(np.mean(values)) if values else 0.0


def check_request(fields: Fields, keys: tuple[str, str, str | None], ttft_s: float, e2e_s: float, output: int) -> None:
    """A successful request's values that cannot all be true: a first token after the response ended, or no
    output token at all. keys name the TTFT, latency and output-token fields (None: the report has no such field
    of its own)."""
    ttft_key, e2e_key, output_key = keys
    if ttft_s > e2e_s:
        raise fields.error(
            ttft_key, f"time to first token {ttft_s:g} s is after the end of the request ({e2e_key} {e2e_s:g} s)"
        )
    if output < 1:
        raise fields.error(output_key or e2e_key, "a successful request with no output token")


def check_rising(fields: Fields, levels: dict[str, float]) -> None:
    """Reported percentiles (field -> value, in rising level) cannot fall."""
    for (low_key, low), (high_key, high) in pairwise(levels.items()):
        if high < low:
            raise fields.error(high_key, f"{high:g} is below {low_key} ({low:g}): a higher percentile cannot be lower")
