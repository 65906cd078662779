"""A run's summary as typed values (`RunSummary`) and its JSON form: to_json() is exactly the object that
summary.json and `simulate --json` hold (written with sorted keys), from_json() reads one back.

Each part is a frozen dataclass named as its JSON key's meaning; a JSON value's type is kept as it came
(an integer count stays an integer), so from_json(x).to_json() == x. The parts a run fills in after the
metrics (config, cluster, simulation, warnings) are None where a summary does not have them, and then
absent from the JSON (a recorded example drops its wall-clock-free `simulation` part too)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, TypeVar

from ttftsim.metrics.slo import SloVerdict

T = TypeVar("T")


def _flat(cls: type[T], data: dict[str, Any]) -> T:
    """A dataclass of plain fields from its JSON object (every field required)."""
    return cls(**{f.name: data[f.name] for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Distribution:
    """Mean and percentiles (metrics/percentiles.py), seconds; all None when there were no values."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    p999: float | None


@dataclass(frozen=True)
class QuantileInterval:
    """The 95% order-statistic interval [X(rank_lo), X(rank_hi)] of one percentile and the coverage the
    ranks reach; all None with fewer than two values."""

    lo: float | None
    hi: float | None
    rank_lo: int | None
    rank_hi: int | None
    coverage: float | None


@dataclass(frozen=True)
class QuantileIntervals:
    confidence: float
    num_samples: int
    p50: QuantileInterval
    p90: QuantileInterval
    p99: QuantileInterval
    p999: QuantileInterval

    def by_level(self) -> dict[str, QuantileInterval]:
        return {"p50": self.p50, "p90": self.p90, "p99": self.p99, "p999": self.p999}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QuantileIntervals:
        levels = {name: _flat(QuantileInterval, data[name]) for name in ("p50", "p90", "p99", "p999")}
        return cls(data["confidence"], data["num_samples"], **levels)


@dataclass(frozen=True)
class RequestCounts:
    arrived: int
    finished: int
    rejected: int
    in_flight: int
    aborted: int
    failed: int
    preemptions: int


@dataclass(frozen=True)
class TtftBreakdown:
    """Mean seconds of each part of TTFT over the requests that got a first token (None: none did)."""

    gateway_s: float | None
    queue_s: float | None
    recompute_s: float | None
    prefill_s: float | None
    waiting_s: float | None
    stream_s: float | None
    frontend_s: float | None


BREAKDOWN = tuple(f.name for f in fields(TtftBreakdown))


@dataclass(frozen=True)
class Throughput:
    span_s: float
    requests_per_s: float
    output_tokens_per_s: float
    prompt_tokens_per_s: float
    goodput_requests_per_s: float | None  # None without a per-request target (slo ttft_s, tpot_s, e2e_s) to judge by


@dataclass(frozen=True)
class PrefixCache:
    query_tokens: int
    hit_tokens: int
    hit_rate: float


@dataclass(frozen=True)
class RunConfig:
    """What produced the run: names, the resolved engine arguments, the KV cache and memory plan."""

    scenario: str
    model: str
    hardware: str
    engine: dict[str, Any]  # the engine arguments as resolved (vLLM's defaults filled in)
    num_gpu_blocks: int
    kv_capacity_tokens: int
    memory_plan_bytes: dict[str, int] | None
    kernel_costs: str
    seed: int


@dataclass(frozen=True)
class ColdStarts:
    count: int
    median: float | None
    max: float | None


OPTIONAL_CLUSTER_FIGURES = ("alerts", "controller_actions")


@dataclass(frozen=True)
class ClusterFigures:
    """A cluster run: cost, SLO-violation minutes, pods, cold starts, scaling, retries, faults."""

    node_hours: float
    gpu_hours: float
    cost_usd: float
    cost_per_million_output_tokens_usd: float | None
    slo_violation_minutes: float | None
    pods_created: int
    cold_start_s: ColdStarts
    max_ready_replicas: int
    scale_events: int
    retried_requests: int
    failed_requests: int
    faults: tuple[dict[str, Any], ...]
    pods_not_starting: tuple[str, ...]
    pods_pending: int
    pending_reasons: tuple[str, ...]
    alerts: dict[str, Any] | None = None  # alert rules' firings, pages, missed SLO minutes (with rules)
    controller_actions: dict[str, int] | None = None  # a custom controller's actions by kind (with one)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        optional = {key: data.pop(key) for key in OPTIONAL_CLUSTER_FIGURES}
        data |= {key: value for key, value in optional.items() if value is not None}  # only when modelled
        return data | {key: list(data[key]) for key in ("faults", "pods_not_starting", "pending_reasons")}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterFigures:
        optional = OPTIONAL_CLUSTER_FIGURES
        values = {f.name: data[f.name] for f in fields(cls) if f.name in data or f.name not in optional}
        values["cold_start_s"] = _flat(ColdStarts, data["cold_start_s"])
        for key in ("faults", "pods_not_starting", "pending_reasons"):
            values[key] = tuple(data[key])
        return cls(**values)


@dataclass(frozen=True)
class SimulationFacts:
    sim_end_s: float
    iterations: int


@dataclass(frozen=True)
class RunSummary:
    """Request counts, TTFT / TPOT / ITL / end-to-end distributions, the TTFT intervals and breakdown,
    throughput and goodput, prefix-cache hits, the SLO verdict (None: no percentile target), and what a
    simulation adds: its config, cluster figures, simulated span and what it read but did not model."""

    requests: RequestCounts
    ttft_s: Distribution
    ttft_interval_s: QuantileIntervals
    tpot_s: Distribution
    itl_s: Distribution
    e2e_s: Distribution
    ttft_breakdown_mean_s: TtftBreakdown
    throughput: Throughput
    prefix_cache: PrefixCache
    slo: SloVerdict | None = None
    config: RunConfig | None = None
    cluster: ClusterFigures | None = None
    simulation: SimulationFacts | None = None
    warnings: tuple[str, ...] | None = None
    external_prefix_cache: PrefixCache | None = None  # LMCache's hits past the GPU's (vLLM external_prefix_cache_*)

    def to_json(self) -> dict[str, Any]:
        """The summary.json object (its keys are written sorted)."""
        data: dict[str, Any] = {
            name: asdict(getattr(self, name))
            for name in ("requests", "ttft_s", "ttft_interval_s", "tpot_s", "itl_s", "e2e_s")
        }
        data["ttft_breakdown_mean_s"] = asdict(self.ttft_breakdown_mean_s)
        data["throughput"] = asdict(self.throughput)
        data["prefix_cache"] = asdict(self.prefix_cache)
        if self.slo is not None:
            data["slo"] = self.slo.to_json()
        if self.config is not None:
            data["config"] = asdict(self.config)
        if self.cluster is not None:
            data["cluster"] = self.cluster.to_json()
        if self.simulation is not None:
            data["simulation"] = asdict(self.simulation)
        if self.warnings is not None:
            data["warnings"] = list(self.warnings)
        if self.external_prefix_cache is not None:
            data["external_prefix_cache"] = asdict(self.external_prefix_cache)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunSummary:
        """A summary.json object as to_json writes it; ValueError naming what is missing or malformed (a
        summary of another ttftsim version, a hand-edited one)."""
        try:
            return cls._parse(data)
        except KeyError as exc:
            raise ValueError(f"not a summary this ttftsim version reads: no {exc.args[0]}") from None
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"not a summary this ttftsim version reads: {exc}") from None

    @classmethod
    def _parse(cls, data: dict[str, Any]) -> RunSummary:
        return cls(
            requests=_flat(RequestCounts, data["requests"]),
            ttft_s=_flat(Distribution, data["ttft_s"]),
            ttft_interval_s=QuantileIntervals.from_json(data["ttft_interval_s"]),
            tpot_s=_flat(Distribution, data["tpot_s"]),
            itl_s=_flat(Distribution, data["itl_s"]),
            e2e_s=_flat(Distribution, data["e2e_s"]),
            ttft_breakdown_mean_s=_flat(TtftBreakdown, data["ttft_breakdown_mean_s"]),
            throughput=_flat(Throughput, data["throughput"]),
            prefix_cache=_flat(PrefixCache, data["prefix_cache"]),
            slo=SloVerdict.from_json(data["slo"]) if "slo" in data else None,
            config=_flat(RunConfig, data["config"]) if "config" in data else None,
            cluster=ClusterFigures.from_json(data["cluster"]) if "cluster" in data else None,
            simulation=_flat(SimulationFacts, data["simulation"]) if "simulation" in data else None,
            warnings=tuple(data["warnings"]) if "warnings" in data else None,
            external_prefix_cache=(
                _flat(PrefixCache, data["external_prefix_cache"]) if "external_prefix_cache" in data else None
            ),
        )
