"""Workload schemas: arrival processes, length distributions, prefix sharing, traces, closed loops.

Variants are discriminated unions on `type`. Rates are requests per second; lengths are tokens.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Literal

from pydantic import Field, model_validator

from ttftsim.config.base import StrictModel

# ---- lengths ----


class FixedLength(StrictModel):
    type: Literal["fixed"] = Field(description="Always the same length")
    value: int = Field(ge=1, description="Tokens")


class UniformLength(StrictModel):
    type: Literal["uniform"] = Field(description="Uniform integer between low and high inclusive")
    low: int = Field(ge=1, description="Smallest length")
    high: int = Field(ge=1, description="Largest length")

    @model_validator(mode="after")
    def _ordered(self) -> UniformLength:
        if self.high < self.low:
            raise ValueError(f"high ({self.high}) is below low ({self.low})")
        return self


def _mean_inside_the_clip(mean: float, low: int, high: int) -> None:
    """A length distribution clipped to [low, high] cannot average a mean outside it (mean 1,000 with high 500
    gave a mean of 458 without a word)."""
    if high < low:
        raise ValueError(f"high ({high}) is below low ({low})")
    if not low <= mean <= high:
        raise ValueError(
            f"mean ({mean:g}) is outside [low, high] = [{low}, {high}]: the lengths are clipped to that range, so "
            "they cannot have that mean"
        )


class NormalLength(StrictModel):
    type: Literal["normal"] = Field(description="Normal, rounded and clipped to [low, high]")
    mean: float = Field(gt=0, description="Mean tokens")
    std: float = Field(ge=0, description="Standard deviation")
    low: int = Field(default=1, ge=1, description="Lower clip")
    high: int = Field(default=1_000_000, ge=1, description="Upper clip")

    @model_validator(mode="after")
    def _clip(self) -> NormalLength:
        _mean_inside_the_clip(self.mean, self.low, self.high)
        return self


class LognormalLength(StrictModel):
    type: Literal["lognormal"] = Field(description="Lognormal with the given mean and std, clipped to [low, high]")
    mean: float = Field(gt=0, description="Mean tokens")
    std: float = Field(gt=0, description="Standard deviation in tokens")
    low: int = Field(default=1, ge=1, description="Lower clip")
    high: int = Field(default=1_000_000, ge=1, description="Upper clip")

    @model_validator(mode="after")
    def _clip(self) -> LognormalLength:
        _mean_inside_the_clip(self.mean, self.low, self.high)
        return self


class EmpiricalLength(StrictModel):
    type: Literal["empirical"] = Field(description="Sampled with replacement from a file of observed lengths")
    path: str = Field(
        description="CSV (one column, or `column`; no header when the first line is a number) or JSON list, "
        "relative to the scenario file"
    )
    column: str | None = Field(default=None, description="CSV column to read")


LengthDist = Annotated[
    FixedLength | UniformLength | NormalLength | LognormalLength | EmpiricalLength, Field(discriminator="type")
]

# ---- arrivals ----


class PoissonArrivals(StrictModel):
    type: Literal["poisson"] = Field(description="Exponential inter-arrival times")
    rate: float = Field(gt=0, description="Requests per second")


class ConstantArrivals(StrictModel):
    type: Literal["constant"] = Field(description="Fixed interval 1/rate (inference-perf 'constant')")
    rate: float = Field(gt=0, description="Requests per second")


class GammaArrivals(StrictModel):
    type: Literal["gamma"] = Field(description="Gamma renewal process with a coefficient of variation")
    rate: float = Field(gt=0, description="Requests per second")
    cv: float = Field(
        ge=0.01, le=100, description="Coefficient of variation of inter-arrival times (1 = Poisson; 0.01 to 100)"
    )


class WeibullArrivals(StrictModel):
    type: Literal["weibull"] = Field(description="Weibull renewal process with a coefficient of variation")
    rate: float = Field(gt=0, description="Requests per second")
    cv: float = Field(gt=0.05, le=20, description="Coefficient of variation of inter-arrival times")


class Stage(StrictModel):
    rate: float = Field(gt=0, description="Requests per second in this stage")
    duration_s: float = Field(gt=0, description="Stage length in seconds")


class StagedArrivals(StrictModel):
    type: Literal["stages"] = Field(description="Rate stages one after another, as inference-perf runs them")
    process: Literal["constant", "poisson", "inference-perf-constant", "inference-perf-poisson"] = Field(
        default="constant",
        description="Arrivals within a stage: every 1/rate, Poisson, or as inference-perf's load timers draw them "
        "(its 'constant': int(rate x duration) exponential gaps scaled to fill the stage; its 'poisson': a Poisson "
        "count per second, each second's spread the same way)",
    )
    stages: list[Stage] = Field(min_length=1, description="Stages in order")


class RateCurveArrivals(StrictModel):
    type: Literal["rate_curve"] = Field(description="Poisson with a piecewise-linear rate (e.g. diurnal)")
    points: list[tuple[float, float]] = Field(min_length=2, description="(time s, rate req/s) points, increasing")
    repeat: bool = Field(default=False, description="Repeat the curve after its last point")

    @model_validator(mode="after")
    def _increasing(self) -> RateCurveArrivals:
        times = [t for t, _ in self.points]
        if any(b <= a for a, b in itertools.pairwise(times)) or times[0] != 0:
            raise ValueError(f"point times must start at 0 and increase, got {times}")
        if any(r < 0 for _, r in self.points) or max(r for _, r in self.points) <= 0:
            raise ValueError("rates must be >= 0 and not all 0")
        return self


class ClosedLoop(StrictModel):
    type: Literal["closed_loop"] = Field(description="N clients, each sending its next request when one finishes")
    clients: int = Field(ge=1, le=100_000, description="Concurrent clients")
    think_time_s: float = Field(default=0.0, ge=0, description="Pause between a response and the next request")
    ramp_up_s: float = Field(
        default=0.0, ge=0, description="Clients send their first request at uniform random times within this window"
    )


OpenArrivals = Annotated[
    PoissonArrivals | ConstantArrivals | GammaArrivals | WeibullArrivals | StagedArrivals | RateCurveArrivals,
    Field(discriminator="type"),
]
Arrivals = Annotated[
    PoissonArrivals
    | ConstantArrivals
    | GammaArrivals
    | WeibullArrivals
    | StagedArrivals
    | RateCurveArrivals
    | ClosedLoop,
    Field(discriminator="type"),
]

# ---- workloads ----


class LoraTraffic(StrictModel):
    """Requests for LoRA adapters of the served model (vLLM --enable-lora): each request names one adapter,
    or the base model."""

    adapters: int = Field(ge=1, le=100_000, description="Distinct adapters the traffic uses")
    rank: int = Field(ge=1, le=512, description="Their LoRA rank (at most the engine's max_lora_rank)")
    popularity: Literal["uniform", "zipf"] = Field(
        default="zipf", description="How requests spread over adapters: uniform, or Zipf (adapter i ~ 1 / i^s)"
    )
    zipf_exponent: float = Field(default=1.0, gt=0, le=5, description="s of the Zipf popularity")
    base_share: float = Field(default=0.0, ge=0, lt=1, description="Share of requests for the base model")


class SyntheticWorkload(StrictModel):
    type: Literal["synthetic"] = Field(description="Arrivals with sampled prompt and output lengths")
    arrivals: Arrivals = Field(description="Arrival process or closed loop")
    prompt_tokens: LengthDist = Field(description="Prompt length distribution")
    output_tokens: LengthDist = Field(description="Output length distribution (ignore_eos)")
    shared_prefix_tokens: int = Field(default=0, ge=0, description="Tokens of one system prompt all requests share")
    duration_s: float | None = Field(default=None, gt=0, description="Stop sending after this many seconds")
    num_requests: int | None = Field(default=None, ge=1, description="Stop after this many requests")
    priority_levels: int = Field(default=1, ge=1, description="Requests get a uniform random priority 0..n-1")
    lora: LoraTraffic | None = Field(default=None, description="Adapters the requests ask for (none: base model)")

    @model_validator(mode="after")
    def _bounded(self) -> SyntheticWorkload:
        staged = isinstance(self.arrivals, StagedArrivals)
        if self.duration_s is None and self.num_requests is None and not staged:
            raise ValueError("set duration_s or num_requests")
        return self


class SharedPrefixWorkload(StrictModel):
    """inference-perf's `shared_prefix` data type (validation/README.md): num_groups x num_prompts_per_group
    distinct prompts (group system prompt + one question), shuffled once; request i sends prompt i % N."""

    type: Literal["shared_prefix"] = Field(description="inference-perf shared_prefix data type")
    arrivals: OpenArrivals = Field(description="Arrival process (inference-perf: stages, its own timers)")
    num_groups: int = Field(ge=1, description="Groups, each with its own system prompt")
    num_prompts_per_group: int = Field(ge=1, description="Questions per group")
    system_prompt_len: int = Field(ge=0, description="System prompt tokens")
    question_len: int = Field(ge=1, description="Question tokens")
    output_len: int = Field(ge=1, description="Output tokens per request")
    duration_s: float | None = Field(default=None, gt=0, description="Stop after this many seconds")
    num_requests: int | None = Field(default=None, ge=1, description="Stop after this many requests")


class ConversationWorkload(StrictModel):
    """Multi-turn chats: each turn resends the whole history (previous prompts and answers) plus a new message."""

    type: Literal["conversation"] = Field(description="Multi-turn conversations that resend their history")
    arrivals: OpenArrivals = Field(description="Arrivals of new conversations")
    turns: LengthDist = Field(description="Turns per conversation")
    system_prompt_tokens: int = Field(default=0, ge=0, description="System prompt shared by all conversations")
    user_tokens: LengthDist = Field(description="New user tokens per turn")
    output_tokens: LengthDist = Field(description="Answer tokens per turn")
    think_time_s: float = Field(default=5.0, ge=0, description="Pause between an answer and the next turn")
    duration_s: float | None = Field(default=None, gt=0, description="Start no conversation after this")
    num_requests: int | None = Field(default=None, ge=1, description="Start at most this many conversations")


class TraceWorkload(StrictModel):
    type: Literal["trace"] = Field(description="Replay a request trace")
    format: Literal["azure", "mooncake", "csv"] = Field(
        description="azure: TIMESTAMP,ContextTokens,GeneratedTokens; mooncake: JSONL with hash_ids; "
        "csv: arrival_s,input_tokens,output_tokens (times in seconds, replayed from the first row)"
    )
    path: str = Field(description="Trace file, relative to the scenario file")
    time_scale: float = Field(default=1.0, gt=0, description="Divide inter-arrival times by this (2 = twice the rate)")
    start_s: float = Field(default=0.0, ge=0, description="Skip requests before this trace time")
    duration_s: float | None = Field(default=None, gt=0, description="Replay this many seconds of (scaled) trace")
    num_requests: int | None = Field(default=None, ge=1, description="Replay at most this many requests")
    jitter_s: float = Field(
        default=0.0, ge=0, description="Spread arrivals uniformly within buckets of this width (Mooncake's ~3 s)"
    )


Workload = Annotated[
    SyntheticWorkload | SharedPrefixWorkload | ConversationWorkload | TraceWorkload, Field(discriminator="type")
]
