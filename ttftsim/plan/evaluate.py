"""One candidate's work, as plain functions of (plan, candidate) that any worker process can run.

- bound: does it start at all (memory plan, TP against heads), and its saturated throughput (a flood's
  completion rate while requests queued: saturation), an upper bound on the rate one replica sustains within
  the SLO;
- capacity: the highest rate one replica sustains within the SLOs, by bisection on single-replica
  simulations (every arrival counts; one without a first token is late), and which target binds it
  (plan/explain.py);
- predict: the candidate at the peak rate split over its replicas (the table's P50/P99);
- confirm: the whole deployment (replicas behind the router, warm pool) in a cluster simulation at the
  peak rate, replicas added while it misses; with N+1 redundancy, one pod fails a quarter of the way in.

Availability (config/plan.py Availability) sizes on top of the peak: N+1 adds a replica, min_replicas is a
floor, zones rounds the count up to a multiple (an even spread, at least one per zone).
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
import pandas as pd

from ttftsim.cluster.faults import loss_reason
from ttftsim.cluster.run import fixed_cluster
from ttftsim.config.base import LABEL_MAX_CHARS
from ttftsim.config.engine import EngineArgs
from ttftsim.config.plan import SEARCHED_ENGINE_ARGUMENTS, Plan
from ttftsim.config.scenario import Scenario
from ttftsim.config.versions import version_defaults
from ttftsim.config.workload import ConversationWorkload, TraceWorkload
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.metrics.slo import SloFigures, slo_figures
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.plan.explain import binding, closest, missed, rate_unit, ratios, refused
from ttftsim.replica import build_replica
from ttftsim.simulate import simulate
from ttftsim.workload.traces import window_requests

LOW_LOAD = 0.05  # the bisection's known-good end, as a fraction of the saturated throughput
# a flood that never queued (it fit in one batch) is repeated this many times larger, up to this many floods
SATURATION_GROWTH, SATURATION_FLOODS = 4, 3
MIN_SATURATED_COMPLETIONS = 20  # completions in the saturated window that measure its rate
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
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False
    pipeline_parallel_size: int = 1  # not searched: every candidate has the plan engine's (its label says it)

    @property
    def key(self) -> str:
        """The candidate's identity in a plan's checkpoint (the parallelism fields only where not the default,
        so a checkpoint written before they existed still resumes)."""
        fields = self.as_dict()
        for name, default in (("data_parallel_size", 1), ("enable_expert_parallel", False)):
            if fields[name] == default:
                del fields[name]
        return json.dumps(fields, sort_keys=True)

    def as_dict(self) -> dict[str, Any]:
        """Its fields as plan.json and the checkpoint's keys carry them: the pipeline stages only where more than
        one, so a plan of one stage writes and resumes as before the field existed."""
        fields = asdict(self)
        if fields["pipeline_parallel_size"] == 1:
            del fields["pipeline_parallel_size"]
        return fields

    @property
    def num_changed_arguments(self) -> int:
        """The engine arguments it sets away from vLLM's defaults (EngineArgs' own): among candidates tied on
        everything the plan measures, the one closest to vLLM's defaults ranks first, so a feature that made no
        difference in the simulated traffic is not turned off in the recommended deployment."""
        defaults = EngineArgs.model_fields
        return sum(getattr(self, name) != defaults[name].default for name in SEARCHED_ENGINE_ARGUMENTS)

    def shape(self) -> str:
        """The replica's GPUs and parallelism: 'H100-SXM5-80GB TP2 PP2 DP2 EP' (PP, DP, EP only where used)."""
        text = f"{self.hardware} TP{self.tensor_parallel_size}"
        if self.pipeline_parallel_size > 1:
            text += f" PP{self.pipeline_parallel_size}"
        if self.data_parallel_size > 1:
            text += f" DP{self.data_parallel_size}"
        return text + (" EP" if self.enable_expert_parallel else "")

    def label(self) -> str:
        parts = [self.shape()]
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
    """Identity of a plan for its checkpoint: its content, not its file name. Fields added since checkpoints were
    first written are left out while they hold their defaults, so an older checkpoint still resumes."""
    search = {name for name, default in NEW_SEARCH_DEFAULTS.items() if getattr(plan.search, name) == default}
    engine = {name for name, default in NEW_ENGINE_DEFAULTS.items() if getattr(plan.engine, name) == default}
    if plan.engine.block_size is None and version_defaults(plan.engine.vllm_version).block_size == 16:
        # block_size's default was 16 before it followed the version: the same plan as it was written then
        plan = plan.model_copy(update={"engine": plan.engine.model_copy(update={"block_size": 16})})
    dump = plan.model_dump_json(exclude={"search": search, "engine": engine})
    return hashlib.sha256(dump.encode()).hexdigest()[:16]


NEW_SEARCH_DEFAULTS: dict[str, object] = {"data_parallel_size": [1], "enable_expert_parallel": [False]}
NEW_ENGINE_DEFAULTS: dict[str, object] = {
    "data_parallel_size": 1,
    "expert_load_imbalance": None,
    "allow_long_max_model_len": False,
    "enable_extensible_kv_cache": None,
    "optimization_level": None,
    "cudagraph_mode": None,
    "cudagraph_capture_sizes": None,
    "max_cudagraph_capture_size": None,
    "performance_mode": "balanced",
    "max_num_queued_reqs": None,
    "max_num_queued_tokens": None,
    "api_server_shares_core": False,
}


def engine_args(plan: Plan, cand: Candidate) -> dict[str, Any]:
    update: dict[str, Any] = {
        "tensor_parallel_size": cand.tensor_parallel_size,
        "data_parallel_size": cand.data_parallel_size,
        "enable_expert_parallel": cand.enable_expert_parallel,
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
    engine = engine_args(plan, cand)
    if flood:  # the API server's admission limits would refuse most of a flood: the replica's own throughput
        engine.update(max_num_queued_reqs=None, max_num_queued_tokens=None)
    if isinstance(plan.workload, TraceWorkload):
        own = trace_rate(plan.workload.model_dump_json(), base)
        scale = plan.workload.time_scale * (1e6 if flood else rate) / own
        workload.update(time_scale=scale, num_requests=num_requests, duration_s=None)
    else:
        arrivals = {"type": "constant", "rate": 1e6} if flood else {**workload["arrivals"], "rate": rate}
        workload.update(arrivals=arrivals, num_requests=num_requests, duration_s=None)
    return Scenario.model_validate(
        {
            "name": f"{plan.name}: {cand.label()}"[:LABEL_MAX_CHARS],  # the plan's name may be long itself
            "model": plan.model,
            "hardware": cand.hardware,
            "engine": engine,
            "workload": workload,
            "seed": plan.seed,
            **extra,
        }
    )


@functools.lru_cache(maxsize=8)
def trace_rate(workload_json: str, base: str) -> float:
    """Requests per second of a trace as its workload replays it (loaded once per process)."""
    spec = TraceWorkload.model_validate_json(workload_json)
    requests = window_requests(spec, Path(base))
    span = requests[-1].arrival_s - requests[0].arrival_s if len(requests) > 1 else 0.0
    if span <= 0:
        raise InputError(str(spec.path), "", "a plan needs a trace with at least two distinct arrival times")
    return len(requests) / span


def _simulate(plan: Plan, base: str, cand: Candidate, rate: float, num_requests: int) -> SloFigures:
    return _figures(plan, simulate(scenario(plan, cand, rate, num_requests, base), Path(base)))


def _figures(plan: Plan, result: Any) -> SloFigures:
    """Every figure the plan's SLO can judge, of a simulation's result."""
    return slo_figures(result.requests, plan.slo, (result.itl_values, result.itl_weights))


def bound(plan: Plan, base: str, cand: Candidate) -> dict[str, Any]:
    """Whether the candidate starts, and its saturated throughput (requests/s of one replica)."""
    try:
        replica = build_replica(scenario(plan, cand, 1.0, 1, base), Path(base))
    except (DoesNotFitError, InputError) as exc:
        return {"feasible": False, "reason": str(exc.message if isinstance(exc, InputError) else exc)}
    hardware = load_hardware(cand.hardware)
    if cand.tensor_parallel_size > hardware.gpus_per_node * 8:
        return {"feasible": False, "reason": "tensor parallelism beyond 8 nodes"}
    if cand.data_parallel_size > 1 and replica_gpus(plan, cand) > hardware.gpus_per_node:
        return {"feasible": False, "reason": "data-parallel engines beyond one node are not modelled"}
    flooded = plan.probe_requests
    for attempt in range(SATURATION_FLOODS):
        if attempt:
            flooded *= SATURATION_GROWTH
        result = simulate(scenario(plan, cand, 1.0, flooded, base, flood=True), Path(base))
        if not (result.requests["status"] == "finished").any():
            return {"feasible": False, "reason": "no request finishes (prompts longer than the KV cache?)"}
        rate, saturated = saturation(result.requests)
        if saturated or len(result.requests) < flooded:  # a queue formed, or the traffic has no more requests
            break
    # in the workload's own unit: conversations per second for a conversation workload (each is many requests)
    units_per_request = flooded / len(result.requests) if len(result.requests) else 1.0
    return {
        "feasible": True,
        "saturated_rate": rate * min(1.0, units_per_request),
        "kv_blocks": replica.num_blocks,
        "weight_bytes": replica.memory.weight_bytes if replica.memory else 0,
    }


def saturation(requests: pd.DataFrame) -> tuple[float, bool]:
    """(requests per second, whether the replica was saturated) of a flood: the completion rate from the first
    completion to the last admission, while a request waited for every slot a completion freed (the batch
    full: what the replica sustains at most); at least the flood's own rate (completed / last finish), which
    is all there is when every request was admitted before one finished (no queue: not saturated, the rate a
    lower figure than the replica's) or too few finished in that window to measure."""
    done = np.sort(requests.loc[requests["status"] == "finished", "finish_s"].to_numpy(dtype=np.float64))
    overall = len(done) / float(done[-1])
    first, last_admission = float(done[0]), float(np.nanmax(requests["first_scheduled_s"].to_numpy(dtype=np.float64)))
    within = int(np.count_nonzero((done > first) & (done <= last_admission)))
    if last_admission <= first or within < MIN_SATURATED_COMPLETIONS:
        return overall, False
    return max(overall, within / (last_admission - first)), True


def capacity(plan: Plan, base: str, cand: Candidate, saturated: float) -> dict[str, Any]:
    """The highest single-replica rate within the SLOs (bisection) and the target that binds it; infeasible
    if even low load misses. Each probe keeps every target's figure over its target."""
    low = saturated * LOW_LOAD
    result = simulate(scenario(plan, cand, low, plan.probe_requests, base), Path(base))
    figures = _figures(plan, result)
    probes = [{"rate": low, "ratios": ratios(plan.slo, figures)}]
    if not figures.meets(plan.slo):
        why = "; ".join(filter(None, (missed(plan.slo, figures), refused(result.requests))))
        return {
            "feasible": False,
            "reason": f"misses the SLO even at low load ({low:.2f} {rate_unit(plan.workload)}): {why}",
            "probes": probes,
            "binding": binding(probes),
        }
    good, bad = low, saturated
    for _ in range(BISECTION_STEPS):
        mid = (good + bad) / 2
        figures = _simulate(plan, base, cand, mid, plan.probe_requests)
        probes.append({"rate": mid, "ratios": ratios(plan.slo, figures)})
        if figures.meets(plan.slo):
            good = mid
        else:
            bad = mid
    return {
        "feasible": True,
        "max_rate": good,
        "probes": probes,
        "binding": binding(probes),
        "nearest": closest(probes),
    }


def replica_gpus(plan: Plan, cand: Candidate) -> int:
    """GPUs of one replica: the candidate's TP times the plan's pipeline stages (engine.pipeline_parallel_size)
    times its data-parallel engines."""
    return cand.tensor_parallel_size * plan.engine.pipeline_parallel_size * cand.data_parallel_size


def price_per_gpu_hour(plan: Plan, hardware: str) -> float:
    if hardware in plan.gpu_prices:
        return plan.gpu_prices[hardware]
    return load_hardware(hardware).price_per_gpu_hour_usd


def replica_count(plan: Plan, needed: int) -> int:
    """Replicas to run when the peak needs `needed`: N+1 adds one, min_replicas is a floor, and zones
    round up to an even spread."""
    availability = plan.availability
    spare = 1 if availability.redundancy == "n_plus_1" else 0
    count = max(needed + spare, availability.min_replicas, availability.zones)
    return math.ceil(count / availability.zones) * availability.zones


def sizing(plan: Plan, cand: Candidate, max_rate: float) -> dict[str, Any]:
    """Replicas for the peak rate with headroom (needed), with the availability asked (replicas), and what
    they cost per hour."""
    per_replica = max_rate * (1.0 - plan.headroom)
    needed = max(1, math.ceil(plan.target_rate / per_replica)) if per_replica > 0 else 1 << 30
    replicas = replica_count(plan, needed)
    gpus = (replicas + cand.warm_pool) * replica_gpus(plan, cand)
    return {
        "needed": needed,
        "replicas": replicas,
        "gpus": gpus,
        "cost_per_hour": gpus * price_per_gpu_hour(plan, cand.hardware),
        "headroom": 1.0 - plan.target_rate / (replicas * max_rate),
    }


def predict(plan: Plan, base: str, cand: Candidate, replicas: int) -> dict[str, Any]:
    """One replica's share of the peak rate (perfect balance): its SloFigures, as plain values (a task's
    result goes to the checkpoint as JSON)."""
    return _simulate(plan, base, cand, plan.target_rate / replicas, plan.probe_requests).as_dict()


def cluster_scenario(plan: Plan, cand: Candidate, replicas: int, base: str = ".") -> Scenario:
    """The deployment at the peak rate as a fixed cluster; with N+1 redundancy, the first serving pod fails
    a quarter of the way through the arrivals (its requests retried, its replacement cold-starting)."""
    num_requests = confirm_requests(plan)
    extra: dict[str, Any] = {}
    if isinstance(plan.workload, ConversationWorkload):  # sessions outlive their start: stop at a horizon
        extra["horizon_s"] = num_requests / plan.target_rate + CONVERSATION_TAIL_S
    cluster = fixed_cluster(cand.hardware, replicas, replica_gpus(plan, cand), cand.router, cand.warm_pool)
    if plan.availability.redundancy == "n_plus_1":
        cluster["faults"] = [{"at_s": pod_failure_s(plan), "kind": "pod", "index": 0}]
    return scenario(plan, cand, plan.target_rate, num_requests, base, cluster=cluster, **extra)


def confirm_requests(plan: Plan) -> int:
    """Arrivals of a confirming run (requests, or conversations started): confirm_s at the peak rate, at least
    probe_requests."""
    return max(plan.probe_requests, int(plan.target_rate * plan.confirm_s))


def pod_failure_s(plan: Plan) -> float:
    """When the confirming run of an N+1 plan loses a pod: a quarter of its arrivals' span."""
    return round(confirm_requests(plan) / plan.target_rate / 4, 3)


def confirm(plan: Plan, base: str, cand: Candidate, replicas: int) -> dict[str, Any]:
    """The deployment at the peak rate as a cluster; add replicas (a zone's worth at a time) while it misses
    (a few at most)."""
    step, tried = plan.availability.zones, replicas
    result = simulate(cluster_scenario(plan, cand, replicas, base), Path(base))
    for extra in range(1, MAX_EXTRA_REPLICAS + 2):
        figures, failed = _judged(plan, result)
        lost = {"pods_lost": _pods_lost(result), "requests_lost": failed}
        if figures.meets(plan.slo):
            return {"met": True, "replicas": tried, **lost, **figures.as_dict()}
        if extra > MAX_EXTRA_REPLICAS or replicas + extra * step > plan.search.max_replicas:
            break
        tried = replicas + extra * step
        result = simulate(cluster_scenario(plan, cand, tried, base), Path(base))
    judged = result.requests[~_lost_to_pod(result.requests)] if failed else result.requests  # said apart
    return {"met": False, "replicas": tried, **lost, "refused": refused(judged), **figures.as_dict()}


def _judged(plan: Plan, result: Any) -> tuple[SloFigures, int]:
    """A confirming run's figures, and how many requests its injected pod failure failed. With N+1 those (the
    streams the lost pod was serving: started requests are not retried) are counted apart, not against the SLO: no
    replica count saves them, and judged they made the answer depend on confirm_s (a fixed loss against a run's
    length). Requests waiting on the pod were retried and are judged, their lost time in their TTFT."""
    if plan.availability.redundancy != "n_plus_1":
        return _figures(plan, result), 0
    requests = result.requests
    lost = _lost_to_pod(requests)
    figures = slo_figures(requests[~lost], plan.slo, (result.itl_values, result.itl_weights))
    return figures, int(lost.sum())


def _lost_to_pod(requests: pd.DataFrame) -> pd.Series:
    """The requests an injected pod failure failed (cluster/faults.py loss_reason)."""
    reason = loss_reason("pod")
    lost: pd.Series = requests["status"].eq("failed") & requests["reason"].astype(str).str.contains(reason, regex=False)
    return lost


def _pods_lost(result: Any) -> int:
    """Pods the run's faults took down (0 without a cluster or faults)."""
    report = result.cluster
    return 0 if report is None else sum(len(fault.get("pods", [])) for fault in report.faults)


def bound_weight_bytes(plan: Plan, base: str, cand: Candidate) -> float:
    """All the replica's weight bytes (every TP shard), for cold-start estimates."""
    replica = build_replica(scenario(plan, cand, 1.0, 1, base), Path(base))
    return float(replica.memory.weight_bytes * replica.engine.tp) if replica.memory else 0.0
