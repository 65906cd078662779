"""What a run of one scenario leaves (SimulationResult): per-request and per-iteration records, inter-token latencies,
the prefix cache's counts, the final gauges and, for a cluster, its report; and what is read from them: the summary
(with the configuration that produced it and the warnings), the time series and the Prometheus exposition.
simulate.py makes one."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ttftsim.config.engine import EngineArgs
from ttftsim.config.resolved_engine import ResolvedEngine
from ttftsim.config.scenario import Scenario
from ttftsim.config.slo import unit_warnings
from ttftsim.config.versions import version_warnings
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.inputs.files import counted
from ttftsim.metrics.prometheus import exposition
from ttftsim.metrics.run_summary import ClusterFigures, ColdStarts, PrefixCache, RunConfig, RunSummary, SimulationFacts
from ttftsim.metrics.summary import reason_kinds, summarize
from ttftsim.metrics.timeseries import time_series
from ttftsim.model.not_modelled import model_warnings
from ttftsim.replica import Replica, is_disaggregated, window_kept

if TYPE_CHECKING:
    from ttftsim.cluster.run import ClusterReport


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


def _shown_engine(engine: ResolvedEngine, args: EngineArgs) -> dict[str, Any]:
    """The engine's resolved arguments as the summary shows them, with the vLLM version modelled: the quiet ones and
    LMCache's only where they act, the run's seed not at all (RunConfig has it)."""
    windowed = engine.windowed_kv
    shown = {k: v for k, v in asdict(engine).items() if k not in QUIET_ENGINE_KEYS and not k.startswith("lmcache")}
    return (
        shown
        | {  # LMCache's settings, the windowed groups, the hybrid manager's switch and the data-parallel
            # engines only where they act
            "vllm_version": args.vllm_version,  # the version modelled (a default when the scenario names none)
            "api_server": engine.api_server.model_dump(),
            "speculative": engine.speculative.model_dump() if engine.speculative is not None else None,
        }
        | ({"lmcache": engine.lmcache.model_dump()} if engine.lmcache is not None else {})
        | ({"windowed_kv": asdict(windowed)} if windowed is not None else {})
        | ({} if engine.hybrid_kv_cache_manager else {"hybrid_kv_cache_manager": False})
        | ({"dp": engine.dp} if engine.dp > 1 else {})
        | _graph_settings(engine, args)
        | {  # the API server's admission limits (engine/admission.py), where set
            name: value
            for name in ("max_num_queued_reqs", "max_num_queued_tokens")
            if (value := getattr(engine, name)) is not None
        }
        | (  # vLLM >= 0.23's hold on CPU-tier loads, where there is a tier
            {"reserve_for_inflight_prefills": engine.reserve_for_inflight_prefills} if engine.kv_offload_blocks else {}
        )
    )


@dataclass(frozen=True)
class SimulationResult:
    """One run: the scenario and seed it ran with, the replica it built, its frames (requests in id order,
    iterations in time order), the inter-token gaps with their weights, and the counters and gauges at its end."""

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
    stalled_at_s: float | None = None  # an engine stalled then with requests left in flight (Engine.is_stuck)
    stalled_requests: int = 0  # the requests those stalled engines held at the end

    def summary(self) -> RunSummary:
        """Summary with the configuration that produced it, and what it read but did not model (warnings).
        Only what the inputs and seed determine: the same bytes every run (the wall time is in run_info)."""
        summary = summarize(
            self.requests,
            (self.itl_values, self.itl_weights),
            self.scenario.slo,
            (self.prefix_query_tokens, self.prefix_hit_tokens),
            self.sim_end_s,
        )
        return replace(
            summary,
            config=self._run_config(),
            cluster=None if self.cluster is None else self._cluster_summary(self.cluster),
            simulation=SimulationFacts(self.sim_end_s, int(self.steps["num_steps"].sum()) if len(self.steps) else 0),
            warnings=self._warnings(),
            external_prefix_cache=None if self.external_prefix is None else PrefixCache(*_rate(self.external_prefix)),
        )

    def _run_config(self) -> RunConfig:
        """The configuration that produced the run: the scenario, model and hardware by name, the engine's
        arguments as shown (_shown_engine), vLLM's count of KV blocks, the memory plan, the kernel costs, the seed."""
        engine, memory = self.replica.engine, self.replica.memory
        model, hardware = self.replica.perf.deployment.model, self.replica.perf.deployment.hardware
        windowed = engine.windowed_kv
        return RunConfig(
            scenario=self.scenario.name,
            model=model.name,
            hardware=hardware.name,
            engine=_shown_engine(engine, self.scenario.engine),
            num_gpu_blocks=self.replica.num_blocks if windowed is None else windowed.num_blocks,  # vLLM's count
            kv_capacity_tokens=self.replica.num_blocks * engine.block_size,
            memory_plan_bytes=asdict(memory) if memory else None,
            kernel_costs=self.replica.kernel_costs,
            seed=self.seed,
        )

    def _warnings(self) -> tuple[str, ...]:
        """What the run read but did not model, or what went wrong in it: the SLO's units, the version's, the
        model's, a stall's, the refusals', the node pools' and the calibrated kernels' ranges left, in that
        order."""
        engine, model = self.replica.engine, self.replica.perf.deployment.model
        kept = window_kept(model, engine, is_disaggregated(self.scenario))
        return tuple(
            unit_warnings(self.scenario.slo)
            + version_warnings(self.scenario.engine.vllm_version)
            + model_warnings(model, engine.max_model_len, engine.weight_dtype, kept)
            + self.stall_warnings()
            + refusal_warnings(self.requests)
            + self.pool_warnings()
            + self.replica.perf.costs.extrapolated()
        )

    def pool_warnings(self) -> list[str]:
        """A cluster's GPU node pool of other hardware than the scenario's: its pods run as that GPU's replicas,
        while the header's GPUs and KV blocks are the scenario hardware's."""
        cluster, hardware = self.scenario.cluster, self.replica.perf.deployment.hardware
        if cluster is None:
            return []
        return [
            f"cluster.node_pools.{index}.hardware is {pool.hardware}, not the scenario's {hardware.name}: the "
            f"replicas on its nodes run as {pool.hardware} replicas (their own memory plan and speed); the GPUs and "
            f"KV blocks in the summary's header are {hardware.name}'s"
            for index, pool in enumerate(cluster.node_pools)
            if (kind := _gpu_kind(pool.hardware)) is not None and kind != hardware.name
        ]

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


def _gpu_kind(hardware: str) -> str | None:
    """A node pool's GPU profile name; None for a CPU pool, or a profile not found by name from here (a path:
    the run itself resolved it beside the scenario)."""
    try:
        profile = load_hardware(hardware)
    except InputError:
        return None
    return profile.name if profile.kind != "cpu" else None


def refusal_warnings(requests: pd.DataFrame) -> list[str]:
    """A line for each kind of refusal (the engine's or its API server's rejections, the gateway's failures, streams
    cut when their replica was lost): how many requests, and the first one's reason as the engine gave it. Kinds are
    reasons alike but for their numbers ('prompt 4088 + output 37 tokens exceed max_model_len 4096'), and whether
    the failed requests had had their first token; the most frequent first."""
    refused = requests[requests["status"].isin(("rejected", "failed"))]
    if not len(refused):
        return []
    streamed = (
        refused["first_token_s"].fillna(-1.0).to_numpy() >= 0
        if "first_token_s" in refused.columns
        else np.zeros(len(refused), dtype=bool)
    )
    kinds = refused["status"].astype(str) + np.where(streamed, " streamed", "") + ": " + reason_kinds(refused["reason"])
    groups = refused.groupby(kinds.to_numpy(), sort=False)
    order = sorted(groups.indices.items(), key=lambda item: (-len(item[1]), item[0]))
    lines = []
    for _, rows in order:
        first = refused.iloc[int(rows[0])]
        if first["status"] == "rejected":
            ended = "rejected, never served"
        else:
            ended = "failed mid-stream, after their first token" if streamed[rows[0]] else "failed, never served"
        reason = first["reason"] if isinstance(first["reason"], str) and first["reason"] else "no reason recorded"
        lines.append(
            f"{len(rows):,} of {counted(len(requests), 'request')} {ended}: e.g. {reason} "
            "(every request's reason: the reason column of requests.csv, written with --out)"
        )
    return lines


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


def _rate(counts: tuple[int, int]) -> tuple[int, int, float]:
    return counts[0], counts[1], counts[1] / counts[0] if counts[0] else 0.0
