"""Run one scenario: build the replica from the model, hardware and engine arguments, drive it (or, with a
`cluster` section, the whole cluster: cluster/run.py) with the workload, and return what the run leaves
(simulation_result.py): per-request records, per-iteration records and inter-token latencies."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Generator
from contextlib import ContextDecorator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import simpy

from ttftsim.config.loading import load_file
from ttftsim.config.scenario import Scenario
from ttftsim.config.workload import StagedArrivals
from ttftsim.engine.data_parallel import ServingEngine, lmcache_tiers, serving_engine
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import Columns, Recorder
from ttftsim.errors import InputError
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.replica import Replica, build_replica
from ttftsim.simulation_result import SimulationResult
from ttftsim.workload.budget import WorkLimitError, check_blocks, check_scenario
from ttftsim.workload.file_refs import check_files
from ttftsim.workload.sources import WorkloadContext, open_loop_source
from ttftsim.workload.start import start_workload

Progress = Callable[[float], None]


def load_scenario(path: Path) -> Scenario:
    return load_file(Scenario, path)


class CollectorOff(ContextDecorator):
    """Simulate with the cyclic garbage collector off: a run allocates millions of objects in no cycle
    (requests, states, rows, events), freed by reference counting, and each collector pass re-scanned the
    young ones for cycles it hardly ever found (7-12% of a run with the collector on; frozen on what exists and
    passing over young objects 70 times less often, still 7%). A fleet's hour has the same peak RSS either way
    (docs/performance.md). Nothing simulated depends on it. The setting is process-wide: runs in several threads
    (the dashboard) share it, restored by the last to end."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._was_enabled = True

    def __enter__(self) -> None:
        with self._lock:
            if not self._running:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._running += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._running -= 1
            if not self._running and self._was_enabled:
                gc.enable()


collector_off = CollectorOff()


@collector_off
def simulate(
    scenario: Scenario,
    base: Path = Path(),
    seed: int | None = None,
    *,
    closed_form_decode: bool = True,
    push_arrivals: bool = False,
    progress: Progress | None = None,
    source: str = "scenario",
) -> SimulationResult:
    """Simulate one replica under the scenario's workload; same scenario and seed, same numbers.
    closed_form_decode=False steps every iteration and push_arrivals=True delivers open-loop arrivals
    through a source process: both are reference paths that must give the same results."""
    started = time.perf_counter()
    check_scenario(scenario, source)  # the work it asks for, refused beyond the limits before anything runs
    check_files(scenario.workload, base, source, "workload")
    try:
        replica = build_replica(scenario, base, source)
    except DoesNotFitError as exc:  # the message names the model, dtype, TP and hardware
        raise InputError(source, "model, hardware, engine", f"does not fit: {exc}") from None
    check_blocks(replica.num_blocks, source)
    try:
        return _run(scenario, base, seed, replica, source, started, closed_form_decode, push_arrivals, progress)
    except WorkLimitError as exc:  # a closed loop or conversations reached the request limit while running
        raise InputError(source, "workload", exc.message) from None


def _run(
    scenario: Scenario,
    base: Path,
    seed: int | None,
    replica: Replica,
    source: str,
    started: float,
    closed_form_decode: bool,
    push_arrivals: bool,
    progress: Progress | None,
) -> SimulationResult:
    """Run the replica (with a cluster section, the cluster) under the workload until the horizon, or until
    nothing is left to happen."""
    if scenario.cluster is not None:
        return _simulate_cluster(scenario, base, seed, replica, source, started)
    env = simpy.Environment()
    recorder = Recorder(replica.engine.client_latency_s)
    run_seed = scenario.seed if seed is None else seed
    engine = _serving_engine(env, scenario, replica, recorder, run_seed, closed_form_decode)
    _start_traffic(env, scenario, base, engine, run_seed, push_arrivals)
    expected = scenario.horizon_s or expected_duration(scenario)
    if progress is not None and expected:
        env.process(_ticker(env, expected, progress))
    env.run(until=scenario.horizon_s)
    return _replica_result(scenario, run_seed, replica, env, engine, recorder, started)


def _serving_engine(
    env: simpy.Environment,
    scenario: Scenario,
    replica: Replica,
    recorder: Recorder,
    run_seed: int,
    closed_form_decode: bool,
) -> ServingEngine:
    """The replica's engine (its data-parallel ranks behind their load balancer, where it has several)."""
    return serving_engine(
        env,
        replace(replica.engine, seed=run_seed),  # the seed also draws accepted draft tokens
        replica.cost,
        replica.num_blocks,
        recorder,
        replica.perf.deployment.model.is_moe,  # DP ranks of an MoE model step together
        closed_form_decode=closed_form_decode,
        client_timeout_s=scenario.client_timeout_s,
        first_visible_token=scenario.first_visible_token,
        attention_window=replica.perf.attention_window,
    )


def _start_traffic(
    env: simpy.Environment, scenario: Scenario, base: Path, engine: ServingEngine, run_seed: int, push_arrivals: bool
) -> None:
    """Start the workload: a single engine takes an open loop's arrivals from its feed unless push_arrivals;
    otherwise a source process submits them at their times."""
    rng = np.random.default_rng(run_seed)
    requests = start_workload(env, scenario.workload, WorkloadContext(rng, base), engine.submit, scenario.client)
    if requests is not None and isinstance(engine, Engine) and not push_arrivals:
        engine.attach_feed(requests)
    elif requests is not None:  # pushed at their arrival times (DP ranks: through the load balancer)
        env.process(open_loop_source(env, requests, engine.submit))


def _replica_result(
    scenario: Scenario,
    run_seed: int,
    replica: Replica,
    env: simpy.Environment,
    engine: ServingEngine,
    recorder: Recorder,
    started: float,
) -> SimulationResult:
    """What the run leaves once it has ended: requests still in flight recorded as such, the final gauges."""
    gauges = {
        "num_requests_running": float(engine.num_running),
        "num_requests_waiting": float(engine.num_waiting),
        "kv_cache_usage_perc": engine.kv.usage(),
    }
    for state in engine.in_flight():
        recorder.request(state, 0, "in_flight")
    itl_values, itl_weights = recorder.itl_samples(copy=False)
    stalled_at, stalled_requests = _stalled([engine])
    return SimulationResult(
        scenario,
        run_seed,
        replica,
        recorder.requests_frame(),
        recorder.steps_frame(),
        itl_values,
        itl_weights,
        engine.kv.query_tokens,
        engine.kv.hit_tokens,
        env.now,
        time.perf_counter() - started,
        gauges,
        external_prefix=lmcache_counts([engine]),
        stalled_at_s=stalled_at,
        stalled_requests=stalled_requests,
    )


def _stalled(engines: list[Any]) -> tuple[float | None, int]:
    """When the first engine (a data-parallel replica's rank, a cluster pod's engine) that was still stalled at the
    end stopped, and how many requests the stalled ones held (Engine.is_stuck, checked by the plain loop, the
    pipeline-parallel loop and, per rank, the lockstep loop of an MoE replica's data-parallel ranks)."""
    ranks = [rank for engine in engines for rank in getattr(engine, "ranks", [engine]) if isinstance(rank, Engine)]
    stalled = [rank for rank in ranks if rank.stalled_at_s is not None and rank.scheduler.has_work()]
    if not stalled:
        return None, 0
    return min(rank.stalled_at_s or 0.0 for rank in stalled), sum(rank.scheduler.num_waiting for rank in stalled)


def expected_duration(scenario: Scenario) -> float | None:
    """How long the traffic lasts, when the scenario says (for a progress bar)."""
    workload = scenario.workload
    arrivals = getattr(workload, "arrivals", None)
    if isinstance(arrivals, StagedArrivals):
        return sum(stage.duration_s for stage in arrivals.stages)
    return workload.duration_s


def _ticker(env: simpy.Environment, expected: float, progress: Progress) -> Generator[simpy.Event, Any, None]:
    step = expected / 100
    while env.now < expected:
        yield env.timeout(step)
        progress(min(1.0, env.now / expected))


def _simulate_cluster(
    scenario: Scenario, base: Path, seed: int | None, replica: Replica, source: str, started: float
) -> SimulationResult:
    # imported here, not at the top: a one-replica run (most runs, and every plan candidate's first look)
    # does not load the cluster's dozen modules (about 80 ms of a 1 s run's start-up)
    from ttftsim.cluster.run import cluster_report, run_cluster

    run_seed = scenario.seed if seed is None else seed
    recorder = Recorder(replica.engine.client_latency_s)
    cluster, end = run_cluster(scenario, base, run_seed, recorder, source, replica)
    requests = recorder.requests_frame()
    requests["attempts"] = requests["request_id"].map(cluster.attempts).fillna(1).astype("int64")
    if scenario.cluster is not None and scenario.cluster.disaggregation is not None:
        requests["prefill_done_s"] = requests["request_id"].map(cluster.prefill_done_s).astype("float64")
        requests["kv_transfer_s"] = requests["request_id"].map(cluster.kv_transfer_s).astype("float64")
    engines = [pod.engine for pod in cluster.pods if pod.engine is not None]
    itl_values, itl_weights = recorder.itl_samples(copy=False)
    live = [e for pod, e in ((p, p.engine) for p in cluster.pods) if e is not None and pod.state == "ready"]
    gauges = {
        "num_requests_running": float(sum(e.num_running for e in live)),
        "num_requests_waiting": float(sum(e.num_waiting for e in live)),
        "kv_cache_usage_perc": float(np.mean([e.kv.usage() for e in live])) if live else 0.0,
    }
    steps = _time_ordered([recorder.steps, cluster.prefill_recorder.steps])
    stalled_at, stalled_requests = _stalled([pod.engine for pod in cluster.pods if pod.engine and pod.state == "ready"])
    return SimulationResult(
        scenario,
        run_seed,
        replica,
        requests,
        steps,
        itl_values,
        itl_weights,
        sum(e.kv.query_tokens for e in engines),
        sum(e.kv.hit_tokens for e in engines),
        end,
        time.perf_counter() - started,
        gauges,
        cluster_report(cluster),
        lmcache_counts(engines),
        stalled_at,
        stalled_requests,
    )


def _time_ordered(parts: list[Columns]) -> pd.DataFrame:
    """The iteration rows of every recorder in time order (stable). A day's rows are millions and each copy of
    them hundreds of MB: one recorder's rows are put in order where they are kept, a column at a time; only
    rows of several are joined into a new frame."""
    kept = [part for part in parts if len(part)] or parts[:1]
    if len(kept) == 1:
        kept[0].sort_by("time_s")
        return kept[0].frame()
    steps = pd.concat([part.frame() for part in kept], ignore_index=True)
    if steps["time_s"].is_monotonic_increasing:
        return steps
    return steps.sort_values("time_s", kind="stable").reset_index(drop=True)


def lmcache_counts(engines: list[ServingEngine]) -> tuple[int, int] | None:
    """LMCache's (query, hit) tokens summed over the engines, None where none runs it."""
    tiers = [tier for engine in engines for tier in lmcache_tiers(engine)]
    return (sum(t.query_tokens for t in tiers), sum(t.hit_tokens for t in tiers)) if tiers else None
