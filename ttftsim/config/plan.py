"""A plan file: the model, the traffic, the SLOs and the space of deployments to search (`ttftsim plan`)."""

from __future__ import annotations

import itertools
import math
from typing import Annotated, Any, Literal

from pydantic import Field, PositiveInt, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ttftsim.config.base import FIELD_ERROR, Label, StrictModel
from ttftsim.config.cluster_routing import RouterName
from ttftsim.config.dtypes import KvDtype, WeightDtype
from ttftsim.config.engine import EngineArgs
from ttftsim.config.manifest_options import ManifestOptions
from ttftsim.config.slo import Slo, check_classes, judged_slo
from ttftsim.config.workload import (
    ConstantArrivals,
    ConversationWorkload,
    GammaArrivals,
    PoissonArrivals,
    SharedPrefixWorkload,
    SyntheticWorkload,
    TraceWorkload,
    WeibullArrivals,
    Workload,
)

RATE_ARRIVALS = (PoissonArrivals, ConstantArrivals, GammaArrivals, WeibullArrivals)
SEARCHED_ENGINE_ARGUMENTS = (
    "tensor_parallel_size",
    "data_parallel_size",
    "enable_expert_parallel",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "quantization",
    "kv_cache_dtype",
)


class SearchSpace(StrictModel):
    """Values to try; the plan searches their product (pruning what cannot win)."""

    hardware: list[str] = Field(
        min_length=1, description="Hardware profiles (names, or unique leading parts of them such as h200, or paths)"
    )
    tensor_parallel_size: list[int] = Field(default=[1], min_length=1, description="TP sizes")
    data_parallel_size: list[int] = Field(
        default=[1], min_length=1, description="DP sizes: engines of TP GPUs per replica, on one node"
    )
    enable_expert_parallel: list[bool] = Field(
        default=[False], min_length=1, description="Expert parallelism (whole experts per GPU; MoE models only)"
    )
    max_num_seqs: list[PositiveInt | None] = Field(default=[None], min_length=1, description="None = vLLM's default")
    max_num_batched_tokens: list[PositiveInt | None] = Field(default=[None], min_length=1, description="None = default")
    enable_chunked_prefill: list[bool] = Field(default=[True], min_length=1, description="Chunked prefill")
    enable_prefix_caching: list[bool] = Field(default=[True], min_length=1, description="Prefix caching")
    quantization: list[WeightDtype | None] = Field(default=[None], min_length=1, description="Weight formats")
    kv_cache_dtype: list[KvDtype | Literal["auto"]] = Field(default=["auto"], min_length=1, description="KV formats")
    router: list[RouterName] = Field(default=["least_outstanding"], min_length=1, description="Gateway routing")
    warm_pool: list[int] = Field(default=[0], min_length=1, description="Idle loaded pods kept ready (cost)")
    max_replicas: int = Field(default=64, ge=1, description="Never propose more replicas than this")

    @model_validator(mode="after")
    def _positive(self) -> SearchSpace:
        for name in ("tensor_parallel_size", "data_parallel_size", "warm_pool"):
            if any(v < (0 if name == "warm_pool" else 1) for v in getattr(self, name)):
                raise ValueError(f"{name} values must be positive")
        return self


class Availability(StrictModel):
    """Redundancy kept beyond what the peak rate needs (the plan sizes, prices and confirms with it)."""

    min_replicas: int = Field(default=1, ge=1, description="Never fewer replicas than this")
    redundancy: Literal["none", "n_plus_1"] = Field(
        default="none",
        description="n_plus_1: one replica beyond what the peak needs, so the SLO holds with one pod lost; "
        "the confirming cluster run fails one pod",
    )
    zones: int = Field(
        default=1, ge=1, le=16, description="Zones to spread replicas over evenly: a multiple of zones, one per zone"
    )


class DaySearch(StrictModel):
    """Autoscaling over a day: the winner's deployment under a rate curve, with each HPA setting searched
    and a fixed fleet sized for the peak, compared on cost per day and SLO-violation minutes."""

    rate_curve: list[tuple[float, float]] = Field(
        min_length=2, description="(time s, requests/s) points, piecewise linear (e.g. a diurnal day)"
    )
    min_replicas: list[int] = Field(min_length=1, description="HPA minReplicas values to try")
    max_replicas: list[int] = Field(min_length=1, description="HPA maxReplicas values to try")
    metric: Literal["num_requests_waiting", "ttft_p99_s", "num_requests_running", "kv_cache_usage_perc"] = Field(
        default="num_requests_waiting", description="The HPA's metric (vLLM's, as scraped by Prometheus)"
    )
    targets: list[float] = Field(min_length=1, description="HPA target values to try (the metric's unit)")
    max_violation_minutes: float = Field(
        default=0.0, ge=0, description="SLO-violation minutes a day allowed to the recommended setting"
    )

    @model_validator(mode="after")
    def _curve(self) -> DaySearch:
        times = [t for t, _ in self.rate_curve]
        if times[0] != 0 or any(b <= a for a, b in itertools.pairwise(times)):
            raise ValueError("rate_curve times start at 0 and increase")
        if any(rate < 0 for _, rate in self.rate_curve) or max(rate for _, rate in self.rate_curve) <= 0:
            raise ValueError("rate_curve rates are >= 0, some > 0")
        if any(r < 1 for r in self.min_replicas) or any(r < 1 for r in self.max_replicas):
            raise ValueError("min_replicas and max_replicas values are >= 1")
        if any(t <= 0 for t in self.targets):
            raise ValueError("targets are > 0")
        return self

    @property
    def peak_rate(self) -> float:
        return max(rate for _, rate in self.rate_curve)

    @property
    def span_s(self) -> float:
        return self.rate_curve[-1][0]


class Plan(StrictModel):
    """What `ttftsim plan` searches."""

    name: Label = Field(
        default="plan",
        description="Label used in reports and manifest names (no control characters)",
    )
    model: str = Field(description="Model preset or path to a Hugging Face config.json")
    engine: EngineArgs = Field(default_factory=EngineArgs, description="Engine arguments every candidate shares")
    workload: Workload = Field(
        description="The traffic: open-loop at a rate, or a trace (replayed faster or slower to reach each rate); "
        "its num_requests and duration_s may be left out, each run setting its own (probe_requests, confirm_s)"
    )
    peak_rate: float | None = Field(
        default=None,
        gt=0,
        description="Requests per second to plan for, conversations per second for a conversation workload (default: "
        "the workload's rate; a trace's own)",
    )
    slo: Slo = Field(description="Targets at the peak rate (statistics, goodput; at least one)")
    search: SearchSpace = Field(description="Deployments to consider")
    headroom: float = Field(
        default=0.1, ge=0, lt=1, description="Size replicas so each runs at most at (1 - headroom) of its capacity"
    )
    probe_requests: int = Field(
        default=1200, ge=100, description="Requests per single-replica probe simulation (the bisection's step)"
    )
    confirm_s: float = Field(default=300.0, gt=0, description="Simulated seconds of each confirming cluster run")
    confirm_top: int = Field(default=3, ge=1, description="Cheapest candidates confirmed by a cluster simulation")
    gpu_prices: dict[str, Annotated[float, Field(ge=0)]] = Field(
        default_factory=dict, description="Price per GPU-hour by hardware name (default: the profile's)"
    )
    availability: Availability = Field(default_factory=Availability, description="Redundancy beyond the peak")
    manifests: ManifestOptions = Field(
        default_factory=ManifestOptions, description="The cluster-specific parts of the winner's Kubernetes manifests"
    )
    day: DaySearch | None = Field(
        default=None, description="Autoscaling over a day: HPA settings against a fixed fleet (plan/day.py)"
    )
    seed: int = Field(default=0, ge=0, description="Random seed; same plan and seed, same result")

    @model_validator(mode="before")
    @classmethod
    def _length_optional(cls, data: Any) -> Any:
        """A plan's runs set their own length (probe_requests a probe, confirm_s a cluster run), so a workload other
        than a trace may leave out duration_s and num_requests: it is then probe_requests long, as a probe runs it."""
        workload = data.get("workload") if isinstance(data, dict) else None
        if not isinstance(workload, dict) or workload.get("type") == "trace":
            return data
        if workload.get("duration_s") is None and workload.get("num_requests") is None:
            probe = data.get("probe_requests", cls.model_fields["probe_requests"].default)
            length = _whole(probe) or 1  # a probe_requests the field refuses is said there
            data = {**data, "workload": {**workload, "num_requests": length}}
        return data

    @field_validator("slo")
    @classmethod
    def _judged_slo(cls, slo: Slo) -> Slo:
        return judged_slo(slo, "a plan")

    @model_validator(mode="after")
    def _replica_bounds(self) -> Plan:
        floor = max(self.availability.min_replicas, self.availability.zones)
        if floor > self.search.max_replicas:
            raise ValueError(
                f"availability asks for at least {floor} replicas (min_replicas, zones) but "
                f"search.max_replicas is {self.search.max_replicas}"
            )
        return self

    @model_validator(mode="after")
    def _classes_in_the_traffic(self) -> Plan:
        check_classes(self.slo, getattr(self.workload, "priority_levels", 1), "the workload")
        return self

    @model_validator(mode="after")
    def _searched_engine_arguments(self) -> Plan:
        """An engine argument the search sets per candidate (evaluate.engine_args) is left at its default in
        `engine`: the search's value would silently replace it, or (max_num_seqs, max_num_batched_tokens under the
        search's default [None]) the engine's would run while the candidate is labelled, and its manifests written,
        as vLLM's default."""
        for name in SEARCHED_ENGINE_ARGUMENTS:
            if getattr(self.engine, name) != EngineArgs.model_fields[name].default:
                raise PydanticCustomError(
                    FIELD_ERROR,
                    "a plan's search sets it per candidate: give it as search.{name} (a list; one value to fix it)",
                    {"field": f"engine.{name}", "name": name},
                )
        return self

    @model_validator(mode="after")
    def _rate_traffic(self) -> Plan:
        workload = self.workload
        if isinstance(workload, TraceWorkload):
            if self.day is not None:
                raise ValueError("day: the rate curve replaces the traffic's arrivals, which a trace fixes")
            return self
        if not isinstance(workload, SyntheticWorkload | SharedPrefixWorkload | ConversationWorkload) or not isinstance(
            workload.arrivals, RATE_ARRIVALS
        ):
            raise ValueError(
                "plan traffic must be a trace, or open-loop at a rate (poisson, constant, gamma or weibull "
                "arrivals of a synthetic, shared_prefix or conversation workload)"
            )
        return self

    @property
    def target_rate(self) -> float:
        """Requests/s to plan for (a trace's own rate is filled in as peak_rate when the plan is loaded)."""
        if self.peak_rate is not None:
            return self.peak_rate
        arrivals = self.workload.arrivals  # type: ignore[union-attr]
        assert isinstance(arrivals, RATE_ARRIVALS)
        return float(arrivals.rate)


def _whole(value: object) -> int | None:
    """A count as pydantic's lax int reads it (600 or 600.0), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return int(value) if value == int(value) and value >= 1 else None
