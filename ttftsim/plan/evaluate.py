"""One candidate's work, as plain functions of (plan, candidate) that any worker process can run.

- bound: does it start at all (memory plan, TP against heads), and its saturated throughput, an upper
  bound on the rate one replica sustains within the SLO;
- capacity: the highest rate one replica sustains within the SLOs, by bisection on single-replica
  simulations (every arrival counts; one without a first token is late);
- predict: the candidate at the peak rate split over its replicas (the table's P50/P99);
- confirm: the whole deployment (replicas behind the router, warm pool) in a cluster simulation at the
  peak rate, replicas added one at a time while it misses.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ttftsim.cluster.run import fixed_cluster
from ttftsim.config.plan import Plan
from ttftsim.config.scenario import Scenario
from ttftsim.config.slo import PER_REQUEST_TARGETS
from ttftsim.config.workload import ConversationWorkload, TraceWorkload
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.metrics.slo import SloFigures, slo_figures
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.replica import build_replica
from ttftsim.simulate import simulate
from ttftsim.workload.request import ContentIds
from ttftsim.workload.traces import load_trace

LOW_LOAD = 0.05  # the bisection's known-good end, as a fraction of the saturated throughput
BISECTION_STEPS = 6
MAX_EXTRA_REPLICAS = 3
CONVERSATION_TAIL_S = 300.0  # after the last session starts; turns still unserved then count as late


@dataclass(frozen=True)
class Candidate:
    hardware: str
    tensor_parallel_size: int
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    quantization: str | None
    kv_cache_dtype: str
    router: str
    warm_pool: int

    @property
    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def label(self) -> str:
        parts = [f"{self.hardware} TP{self.tensor_parallel_size}"]
        if self.max_num_seqs is not None:
            parts.append(f"seqs {self.max_num_seqs}")
        if self.max_num_batched_tokens is not None:
            parts.append(f"batch {self.max_num_batched_tokens}")
        if not self.enable_chunked_prefill:
            parts.append("no chunking")
        if not self.enable_prefix_caching:
            parts.append("no prefix cache")
        if self.quantization:
            parts.append(f"w {self.quantization}")
        if self.kv_cache_dtype != "auto":
            parts.append(f"kv {self.kv_cache_dtype}")
        parts.append(self.router)
        if self.warm_pool:
            parts.append(f"warm {self.warm_pool}")
        return ", ".join(parts)


def plan_digest(plan: Plan) -> str:
    """Identity of a plan for its checkpoint: its content, not its file name (the SLO's per-request targets,
    which a plan refuses, left out: the digest a plan had before the SLO schemas were one)."""
    return hashlib.sha256(plan.model_dump_json(exclude={"slo": set(PER_REQUEST_TARGETS)}).encode()).hexdigest()[:16]


def engine_args(plan: Plan, cand: Candidate) -> dict[str, Any]:
    update: dict[str, Any] = {
        "tensor_parallel_size": cand.tensor_parallel_size,
        "enable_chunked_prefill": cand.enable_chunked_prefill,
        "enable_prefix_caching": cand.enable_prefix_caching,
        "quantization": cand.quantization,
        "kv_cache_dtype": cand.kv_cache_dtype,
    }
    if cand.max_num_seqs is not None:
        update["max_num_seqs"] = cand.max_num_seqs
    if cand.max_num_batched_tokens is not None:
        update["max_num_batched_tokens"] = cand.max_num_batched_tokens
    return plan.engine.model_copy(update=update).model_dump()


def scenario(
    plan: Plan, cand: Candidate, rate: float, num_requests: int, base: str = ".", flood: bool = False, **extra: Any
) -> Scenario:
    """The plan's traffic at `rate` requests/s (a trace is replayed faster or slower, keeping its shape);
    flood: everything at once, to measure saturated throughput."""
    workload = plan.workload.model_dump()
    if isinstance(plan.workload, TraceWorkload):
        own = trace_rate(plan.workload.model_dump_json(), base)
        scale = plan.workload.time_scale * (1e6 if flood else rate) / own
        workload.update(time_scale=scale, num_requests=num_requests, duration_s=None)
    else:
        arrivals = {"type": "constant", "rate": 1e6} if flood else {**workload["arrivals"], "rate": rate}
        workload.update(arrivals=arrivals, num_requests=num_requests, duration_s=None)
    return Scenario.model_validate(
        {
            "name": f"{plan.name}: {cand.label()}",
            "model": plan.model,
            "hardware": cand.hardware,
            "engine": engine_args(plan, cand),
            "workload": workload,
            "seed": plan.seed,
            **extra,
        }
    )


@functools.lru_cache(maxsize=8)
def trace_rate(workload_json: str, base: str) -> float:
    """Requests per second of a trace as its workload replays it (loaded once per process)."""
    spec = TraceWorkload.model_validate_json(workload_json)
    requests = load_trace(
        spec.model_copy(update={"num_requests": None}), Path(base), np.random.default_rng(0), ContentIds()
    )
    span = requests[-1].arrival_s - requests[0].arrival_s if len(requests) > 1 else 0.0
    if span <= 0:
        raise InputError(str(spec.path), "", "a plan needs a trace with at least two distinct arrival times")
    return len(requests) / span


def _simulate(plan: Plan, base: str, cand: Candidate, rate: float, num_requests: int) -> SloFigures:
    return slo_figures(simulate(scenario(plan, cand, rate, num_requests, base), Path(base)).requests)


def bound(plan: Plan, base: str, cand: Candidate) -> dict[str, Any]:
    """Whether the candidate starts, and its saturated throughput (requests/s of one replica)."""
    try:
        replica = build_replica(scenario(plan, cand, 1.0, 1, base), Path(base))
    except (DoesNotFitError, InputError) as exc:
        return {"feasible": False, "reason": str(exc.message if isinstance(exc, InputError) else exc)}
    hardware = load_hardware(cand.hardware)
    if cand.tensor_parallel_size > hardware.gpus_per_node * 8:
        return {"feasible": False, "reason": "tensor parallelism beyond 8 nodes"}
    result = simulate(scenario(plan, cand, 1.0, plan.probe_requests, base, flood=True), Path(base))
    finished = result.requests[result.requests["status"] == "finished"]
    if not len(finished):
        return {"feasible": False, "reason": "no request finishes (prompts longer than the KV cache?)"}
    span = float(finished["finish_s"].max())
    # in the workload's own unit: conversations per second for a conversation workload (each is many requests)
    units_per_request = plan.probe_requests / len(result.requests) if len(result.requests) else 1.0
    return {
        "feasible": True,
        "saturated_rate": len(finished) * min(1.0, units_per_request) / span,
        "kv_blocks": replica.num_blocks,
        "weight_bytes": replica.memory.weight_bytes if replica.memory else 0,
    }


def capacity(plan: Plan, base: str, cand: Candidate, saturated: float) -> dict[str, Any]:
    """The highest single-replica rate within the SLOs (bisection); infeasible if even low load misses."""
    low = saturated * LOW_LOAD
    probes = []
    figures = _simulate(plan, base, cand, low, plan.probe_requests)
    probes.append((low, figures.ttft_p99_s))
    if not figures.meets(plan.slo):
        return {
            "feasible": False,
            "reason": f"misses the SLO even at low load ({low:.2f} req/s): P99 TTFT {figures.ttft_p99_s:.3f} s",
            "probes": probes,
        }
    good, bad = low, saturated
    for _ in range(BISECTION_STEPS):
        mid = (good + bad) / 2
        figures = _simulate(plan, base, cand, mid, plan.probe_requests)
        probes.append((mid, figures.ttft_p99_s))
        if figures.meets(plan.slo):
            good = mid
        else:
            bad = mid
    return {"feasible": True, "max_rate": good, "probes": probes}


def price_per_gpu_hour(plan: Plan, hardware: str) -> float:
    if hardware in plan.gpu_prices:
        return plan.gpu_prices[hardware]
    return load_hardware(hardware).price_per_gpu_hour_usd


def sizing(plan: Plan, cand: Candidate, max_rate: float) -> dict[str, Any]:
    """Replicas for the peak rate with headroom, and what they cost per hour."""
    per_replica = max_rate * (1.0 - plan.headroom)
    replicas = max(1, math.ceil(plan.target_rate / per_replica)) if per_replica > 0 else 1 << 30
    gpus = (replicas + cand.warm_pool) * cand.tensor_parallel_size
    return {
        "replicas": replicas,
        "gpus": gpus,
        "cost_per_hour": gpus * price_per_gpu_hour(plan, cand.hardware),
        "headroom": 1.0 - plan.target_rate / (replicas * max_rate),
    }


def predict(plan: Plan, base: str, cand: Candidate, replicas: int) -> dict[str, float]:
    """One replica's share of the peak rate (perfect balance): its SloFigures, as plain values (a task's
    result goes to the checkpoint as JSON)."""
    return _simulate(plan, base, cand, plan.target_rate / replicas, plan.probe_requests).as_dict()


def cluster_scenario(plan: Plan, cand: Candidate, replicas: int, base: str = ".") -> Scenario:
    num_requests = max(plan.probe_requests, int(plan.target_rate * plan.confirm_s))
    extra: dict[str, Any] = {}
    if isinstance(plan.workload, ConversationWorkload):  # sessions outlive their start: stop at a horizon
        extra["horizon_s"] = num_requests / plan.target_rate + CONVERSATION_TAIL_S
    cluster = fixed_cluster(cand.hardware, replicas, cand.tensor_parallel_size, cand.router, cand.warm_pool)
    return scenario(plan, cand, plan.target_rate, num_requests, base, cluster=cluster, **extra)


def confirm(plan: Plan, base: str, cand: Candidate, replicas: int) -> dict[str, Any]:
    """The deployment at the peak rate as a cluster; add replicas while it misses (a few at most)."""
    for extra in range(MAX_EXTRA_REPLICAS + 1):
        count = replicas + extra
        if count > plan.search.max_replicas:
            break
        result = simulate(cluster_scenario(plan, cand, count, base), Path(base))
        figures = slo_figures(result.requests)
        if figures.meets(plan.slo):
            return {"met": True, "replicas": count, **figures.as_dict()}
    return {"met": False, "replicas": replicas + MAX_EXTRA_REPLICAS, **figures.as_dict()}


def bound_weight_bytes(plan: Plan, base: str, cand: Candidate) -> float:
    """All the replica's weight bytes (every TP shard), for cold-start estimates."""
    replica = build_replica(scenario(plan, cand, 1.0, 1, base), Path(base))
    return float(replica.memory.weight_bytes * replica.engine.tp) if replica.memory else 0.0
