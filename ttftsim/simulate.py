"""Run one scenario: build the replica from the model, hardware and engine arguments, drive it with the
workload, and return per-request records, per-iteration records and inter-token latencies."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Generator
from contextlib import ContextDecorator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import simpy
from numpy.typing import NDArray

from ttftsim.config.engine import EngineArgs, ResolvedEngine
from ttftsim.config.loading import load_file
from ttftsim.config.scenario import Scenario
from ttftsim.config.versions import version_warnings
from ttftsim.config.workload import StagedArrivals
from ttftsim.engine.data_parallel import ServingEngine, lmcache_tiers, serving_engine
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import Columns, Recorder
from ttftsim.errors import InputError
from ttftsim.inputs.files import counted
from ttftsim.metrics.prometheus import exposition
from ttftsim.metrics.run_summary import ClusterFigures, ColdStarts, PrefixCache, RunConfig, RunSummary, SimulationFacts
from ttftsim.metrics.summary import summarize
from ttftsim.metrics.timeseries import time_series
from ttftsim.model.not_modelled import model_warnings
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.replica import Replica, build_replica, is_disaggregated, window_kept
from ttftsim.workload.budget import WorkLimitError, check_blocks, check_scenario
from ttftsim.workload.sources import WorkloadContext, open_loop_source, start_workload

if TYPE_CHECKING:
    from ttftsim.cluster.run import ClusterReport

Progress = Callable[[float], None]


# engine fields the summary shows only where they act (the run's seed is shown once, below)
QUIET_ENGINE_KEYS = (
    "seed",
    "windowed_kv",
    "hybrid_kv_cache_manager",
    "dp",
    "reserve_for_inflight_prefills",
    "compiled",
    "cudagraph_mode",
    "capture_sizes",
    "max_num_queued_reqs",
    "max_num_queued_tokens",
)


def _graph_settings(engine: ResolvedEngine, args: EngineArgs) -> dict[str, Any]:
    """What vLLM compiles and captures (config/graphs.py), shown where it is not the default path (-O2's
    FULL_AND_PIECEWISE over the default grid) or where the scenario set the sizes."""
    default = engine.compiled and engine.cudagraph_mode == "FULL_AND_PIECEWISE"
    sizes_set = args.cudagraph_capture_sizes is not None or args.max_cudagraph_capture_size is not None
    if default and not sizes_set and args.performance_mode != "interactivity":
        return {}
    graphs = {"compiled": engine.compiled, "mode": engine.cudagraph_mode, "capture_sizes": list(engine.capture_sizes)}
    return {"cudagraphs": graphs}


@dataclass(frozen=True)
class SimulationResult:
    scenario: Scenario
    seed: int
    replica: Replica
    requests: pd.DataFrame
    steps: pd.DataFrame
    itl_values: NDArray[np.float64]
    itl_weights: NDArray[np.uint32]  # integer weights: how many requests saw each gap
    prefix_query_tokens: int
    prefix_hit_tokens: int
    sim_end_s: float
    wall_s: float
    final_gauges: dict[str, float]
    cluster: ClusterReport | None = None
    external_prefix: tuple[int, int] | None = None  # LMCache's (query, hit) tokens, where it runs
    stalled_at_s: float | None = None  # an engine stalled then with requests left in flight (Engine._stuck)
    stalled_requests: int = 0  # the requests those stalled engines held at the end

    def summary(self) -> RunSummary:
        """Summary with the configuration that produced it, and what it read but did not model (warnings).
        Only what the inputs and seed determine: the same bytes every run (the wall time is in run_info)."""
        engine, memory = self.replica.engine, self.replica.memory
        model, hardware = self.replica.perf.deployment.model, self.replica.perf.deployment.hardware
        windowed = engine.windowed_kv
        kept = window_kept(model, engine, is_disaggregated(self.scenario))
        summary = summarize(
            self.requests,
            (self.itl_values, self.itl_weights),
            self.scenario.slo,
            (self.prefix_query_tokens, self.prefix_hit_tokens),
            self.sim_end_s,
        )
        shown = {k: v for k, v in asdict(engine).items() if k not in QUIET_ENGINE_KEYS and not k.startswith("lmcache")}
        config = RunConfig(
            scenario=self.scenario.name,
            model=model.name,
            hardware=hardware.name,
            engine=shown
            | {  # the run's seed is below; LMCache's settings, the windowed groups, the hybrid manager's
                # switch and the data-parallel engines only where they act
                "api_server": engine.api_server.model_dump(),
                "speculative": engine.speculative.model_dump() if engine.speculative is not None else None,
            }
            | ({"lmcache": engine.lmcache.model_dump()} if engine.lmcache is not None else {})
            | ({"windowed_kv": asdict(windowed)} if windowed is not None else {})
            | ({} if engine.hybrid_kv_cache_manager else {"hybrid_kv_cache_manager": False})
            | ({"dp": engine.dp} if engine.dp > 1 else {})
            | _graph_settings(engine, self.scenario.engine)
            | {  # the API server's admission limits (engine/admission.py), where set
                name: value
                for name in ("max_num_queued_reqs", "max_num_queued_tokens")
                if (value := getattr(engine, name)) is not None
            }
            | (  # vLLM >= 0.23's hold on CPU-tier loads, where there is a tier
                {"reserve_for_inflight_prefills": engine.reserve_for_inflight_prefills}
                if engine.kv_offload_blocks
                else {}
            ),
            num_gpu_blocks=self.replica.num_blocks if windowed is None else windowed.num_blocks,  # vLLM's count
            kv_capacity_tokens=self.replica.num_blocks * engine.block_size,
            memory_plan_bytes=asdict(memory) if memory else None,
            kernel_costs=self.replica.kernel_costs,
            seed=self.seed,
        )
        return replace(
            summary,
            config=config,
            cluster=None if self.cluster is None else self._cluster_summary(self.cluster),
            simulation=SimulationFacts(self.sim_end_s, int(self.steps["num_steps"].sum()) if len(self.steps) else 0),
            warnings=tuple(
                version_warnings(self.scenario.engine.vllm_version)
                + model_warnings(model, engine.max_model_len, engine.weight_dtype, kept)
                + self.stall_warnings()
            ),
            external_prefix_cache=None if self.external_prefix is None else PrefixCache(*_rate(self.external_prefix)),
        )

    def stall_warnings(self) -> list[str]:
        """Said in the summary's warnings and by validate: an engine that stopped for good, and why it may have."""
        if self.stalled_at_s is None:
            return []
        why = (
            "requests copied back from the CPU tier hold their blocks while they wait, vllm-project/vllm issue 45388"
            if self.replica.engine.kv_offload_blocks
            else "e.g. a preempted request whose recompute, prompt and output as one prefill, needs more blocks than "
            "the cache has"
        )
        requests = counted(self.stalled_requests, "request")
        return [
            f"the engine stalled at {self.stalled_at_s:.3f} s and never moved again: {requests} waited with nothing "
            f"running or loading, the first in the queue unable to get the KV blocks it needs ({why}; vLLM's "
            "scheduler too stops at the first waiting request it cannot allocate). They never finished and are not "
            "in the latency percentiles: give the GPU's KV cache more room (gpu_memory_utilization, "
            "num_gpu_blocks_override, tensor parallelism), turn chunked prefill on, run vLLM 0.23 or later with a "
            "CPU tier (its loads wait for room), or give the clients a timeout"
        ]

    def run_info(self) -> dict[str, Any]:
        """What differs between two runs of the same inputs and seed (ttftsim/run_info.py)."""
        return {"wall_s": self.wall_s}

    def _cluster_summary(self, report: ClusterReport) -> ClusterFigures:
        spec = self.scenario.cluster
        assert spec is not None
        pods = report.pods
        cold = pods[pods["ready_s"] > pods["created_s"]]  # started cold (not warm at time 0), ready by the end
        output_tokens = float(self.requests["generated_tokens"].sum())
        target = self.scenario.slo.ttft_p99_s or self.scenario.slo.ttft_s
        return ClusterFigures(
            node_hours=report.cost["node_hours"],
            gpu_hours=report.cost["gpu_hours"],
            cost_usd=report.cost["cost_usd"],
            cost_per_million_output_tokens_usd=report.cost["cost_usd"] / output_tokens * 1e6 if output_tokens else None,
            slo_violation_minutes=(
                report.slo_violation_minutes(self.requests, target, spec.slo_window_s) if target else None
            ),
            pods_created=len(pods),
            cold_start_s=ColdStarts(
                count=len(cold),
                median=float((cold["ready_s"] - cold["created_s"]).median()) if len(cold) else None,
                max=float((cold["ready_s"] - cold["created_s"]).max()) if len(cold) else None,
            ),
            max_ready_replicas=int(report.series["pods_ready"].max()) if len(report.series) else 0,
            scale_events=int((report.hpa["desired"] != report.hpa["current"]).sum()) if len(report.hpa) else 0,
            retried_requests=int((self.requests["attempts"] > 1).sum()),
            failed_requests=int((self.requests["status"] == "failed").sum()),
            faults=tuple(report.faults),
            pods_not_starting=tuple(sorted(set(pods.loc[pods["state"] == "crashloop", "end_reason"]))),
            pods_pending=int((pods["state"] == "pending").sum()),
            pending_reasons=tuple(report.pending_reasons),
            alerts=_alerts(report, self.requests, target, spec.slo_window_s),
            controller_actions=_controller_actions(report),
        )

    def time_series(self) -> pd.DataFrame:
        frame = time_series(self.requests, self.steps, self.scenario.metrics_window_s)
        if self.cluster is None or not len(self.cluster.series):
            return frame
        series = self.cluster.series.rename(columns={"time_s": "window_start_s"})
        return frame.merge(series, on="window_start_s", how="outer").sort_values("window_start_s")

    def prometheus(self) -> str:
        return exposition(
            self.requests,
            (self.itl_values, self.itl_weights),
            self.final_gauges,
            (self.prefix_query_tokens, self.prefix_hit_tokens),
            self.scenario.model,
            external=self.external_prefix,
            server_ttft_extra_s=self.replica.engine.api_server.server_ttft_extra_s,
        )


def _alerts(report: ClusterReport, requests: pd.DataFrame, target: float | None, window_s: float) -> Any:
    """The alert rules' figures as a plain mapping (None without rules)."""
    figures = report.alerts(requests, target, window_s)
    return None if figures is None else asdict(figures)


def _controller_actions(report: ClusterReport) -> dict[str, int] | None:
    """How many of a custom controller's periods ended in each action (add, move, hold, settling, at
    max_replicas, nothing to move), add and move always present (None without a controller)."""
    rows = report.log.controller if report.log is not None else []
    if not rows:
        return None
    counts = {"add": 0, "move": 0}
    for row in rows:
        counts[row["action"]] = counts.get(row["action"], 0) + 1
    return counts


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
    if scenario.cluster is not None:
        return _simulate_cluster(scenario, base, seed, replica, source, started)
    env = simpy.Environment()
    recorder = Recorder(replica.engine.client_latency_s)
    run_seed = scenario.seed if seed is None else seed
    engine = serving_engine(
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
    rng = np.random.default_rng(run_seed)
    requests = start_workload(env, scenario.workload, WorkloadContext(rng, base), engine.submit, scenario.client)
    if requests is not None and isinstance(engine, Engine) and not push_arrivals:
        engine.attach_feed(requests)
    elif requests is not None:  # pushed at their arrival times (DP ranks: through the load balancer)
        env.process(open_loop_source(env, requests, engine.submit))
    expected = scenario.horizon_s or expected_duration(scenario)
    if progress is not None and expected:
        env.process(_ticker(env, expected, progress))
    env.run(until=scenario.horizon_s)
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
    end stopped, and how many requests the stalled ones held (Engine._stuck, checked by the plain loop, the
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
    cluster, end = run_cluster(scenario, base, run_seed, recorder, source)
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


def _rate(counts: tuple[int, int]) -> tuple[int, int, float]:
    return counts[0], counts[1], counts[1] / counts[0] if counts[0] else 0.0
