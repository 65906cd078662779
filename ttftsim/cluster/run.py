"""Run a scenario with a `cluster` section: the workload goes through the gateway to the cluster's pods."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import simpy

from ttftsim.cluster.alerts import AlertFigures, alert_figures
from ttftsim.cluster.cluster import ClusterLog, ClusterSim
from ttftsim.cluster.pod import ReplicaBuild, Wrap
from ttftsim.config.scenario import Scenario
from ttftsim.engine.data_parallel import ServingEngine, serving_engine
from ttftsim.engine.recorder import Recorder
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.kvcache.offload import RemoteStores
from ttftsim.metrics.percentiles import slo_percentile
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.replica import Replica, build_replica, resolve_ref
from ttftsim.workload.sources import WorkloadContext, open_loop_source
from ttftsim.workload.start import start_workload

CHUNK_S = 30.0  # without a horizon, the run stops at the first chunk end with traffic over and nothing left,
DRAIN_LIMIT_S = 3600.0  # or nothing able to serve what is left, or this long after the last arrival


@dataclass(frozen=True)
class ClusterReport:
    pods: pd.DataFrame  # one row per pod: role, node, lifecycle times, cold-start phase durations
    series: pd.DataFrame  # sampled every metrics window: pods by state, desired replicas, nodes, queue
    hpa: pd.DataFrame  # one row per HPA sync: current, ready, desired, metric values
    faults: list[dict[str, Any]]
    cost: dict[str, float]
    pending_reasons: list[str]
    log: ClusterLog | None = None  # controller rows and alert firings

    def slo_violation_minutes(self, requests: pd.DataFrame, ttft_p99_s: float, window_s: float) -> float:
        """Minutes in windows (by arrival) whose TTFT P99 exceeds the target; a request that never got a
        first token counts as infinitely late."""
        return len(violating_windows(requests, ttft_p99_s, window_s)) * window_s / 60.0

    def alerts(self, requests: pd.DataFrame, ttft_p99_s: float | None, window_s: float) -> AlertFigures | None:
        """What the alert rules did, judged against the SLO-violation windows (None without rules)."""
        if self.log is None or not self.log.alerting:
            return None
        violating = violating_windows(requests, ttft_p99_s, window_s) if ttft_p99_s else None
        return alert_figures(self.log.alert_firings, violating, window_s, self.log.alert_scale_outs)


def violating_windows(requests: pd.DataFrame, ttft_p99_s: float, window_s: float) -> set[int]:
    """Indices floor(arrival / window_s) of the windows whose TTFT P99 exceeds the target (the SLO
    percentile's inverted-CDF rule); a request that never got a first token counts as infinitely late."""
    if not len(requests):
        return set()
    ttft = requests["ttft_s"].fillna(np.inf).to_numpy()
    windows = np.floor(requests["arrival_s"].to_numpy() / window_s)
    order = np.argsort(windows, kind="stable")  # one pass over the requests, not one per window (a day: 1,440)
    windows, ttft = windows[order], ttft[order]
    starts = np.flatnonzero(np.r_[True, windows[1:] != windows[:-1]])
    ends = np.r_[starts[1:], len(windows)]
    return {
        int(windows[start])
        for start, end in zip(starts.tolist(), ends.tolist(), strict=True)
        if slo_percentile(ttft[start:end], 0.99) > ttft_p99_s
    }


def fixed_cluster(
    hardware: str, replicas: int, gpus: int, router: str, warm_pool: int = 0, gpus_per_node: int | None = None
) -> dict[str, Any]:
    """A `cluster` section for a fixed deployment: `replicas` (+ warm pods) of `gpus` GPUs each on just enough
    nodes of one pool, none added or removed (what plan confirms and validate predicts with)."""
    per_node = gpus_per_node or load_hardware(hardware).gpus_per_node
    pods = replicas + warm_pool
    # a replica larger than a node takes whole nodes (a gang: placement.py PodShape.gang)
    gpus = max(gpus, 1)
    nodes = pods * math.ceil(gpus / per_node) if gpus > per_node else math.ceil(pods / (per_node // gpus))
    nodes = max(1, nodes)
    pool = {"name": "gpu", "hardware": hardware, "gpus_per_node": per_node}
    pool.update(initial_nodes=nodes, min_nodes=nodes, max_nodes=nodes)
    return {"node_pools": [pool], "replicas": replicas, "warm_pool": warm_pool, "router": {"type": router}}


def replica_builds(scenario: Scenario, base: Path, source: str, own: Replica | None = None) -> Any:
    """hardware name -> ReplicaBuild, built once per hardware (a pod on a CPU node runs at CPU speed); `own`,
    the scenario's own replica where the caller has built it already (its cost model then records what the pods'
    kernels extrapolated: the run's summary reads it). Every engine made by it puts into and reads from the same
    LMCache remote stores (one run's cluster)."""
    cache: dict[str, ReplicaBuild] = {}
    remote_stores = RemoteStores()

    def build(hardware: str) -> ReplicaBuild:
        if hardware in cache:
            return cache[hardware]
        try:
            replica = (
                own
                if own is not None and hardware == scenario.hardware
                else build_replica(scenario.model_copy(update={"hardware": hardware}), base, source)
            )
        except DoesNotFitError as exc:
            primary = build(scenario.hardware) if hardware != scenario.hardware else None
            weight_bytes = primary.weight_bytes if primary else 0.0
            args = scenario.engine
            gpus = args.tensor_parallel_size * args.pipeline_parallel_size * args.data_parallel_size
            cache[hardware] = ReplicaBuild(
                None, weight_bytes, gpus, False, False, f"engine does not start on {hardware}: {exc}"
            )
            return cache[hardware]
        engine_cfg = replica.engine
        memory = replica.memory
        gpus = engine_cfg.gpus  # a replica is one pod (group) of TP x PP x DP GPUs
        weight_bytes = float(memory.weight_bytes * gpus) if memory else 0.0

        def make(env: simpy.Environment, recorder: Recorder, index: int, wrap: Wrap | None) -> ServingEngine:
            return serving_engine(
                env,
                engine_cfg,
                replica.cost if wrap is None else wrap(replica.cost),
                replica.num_blocks,
                recorder,
                replica.perf.deployment.model.is_moe,
                replica=index,
                client_timeout_s=scenario.client_timeout_s,
                first_visible_token=scenario.first_visible_token,
                attention_window=replica.perf.attention_window,
                remote_stores=remote_stores,
            )

        # a request's KV lives on one engine's TP x PP GPUs (one data-parallel rank of the replica's)
        kv_per_token = float(memory.kv_bytes_per_token * engine_cfg.rank_gpus) if memory else 0.0
        extra = engine_cfg.api_server.server_ttft_extra_s
        graphs = engine_cfg.cudagraph_mode != "NONE"
        cache[hardware] = ReplicaBuild(make, weight_bytes, gpus, engine_cfg.compiled, graphs, "", kv_per_token, extra)
        return cache[hardware]

    return build


def run_cluster(
    scenario: Scenario,
    base: Path,
    seed: int,
    recorder: Recorder,
    source: str = "scenario",
    own: Replica | None = None,
) -> tuple[ClusterSim, float]:
    """Simulate (`own`: the scenario's replica, built already); returns the cluster (for its logs and engines)
    and the end time."""
    spec = scenario.cluster
    assert spec is not None
    for index, pool in enumerate(spec.node_pools):
        try:
            load_hardware(resolve_ref(pool.hardware, base), source)
        except InputError as exc:
            raise InputError(source, f"cluster.node_pools.{index}.hardware", exc.message) from None
    builds = replica_builds(scenario, base, source, own)
    primary = builds(scenario.hardware)
    if primary.make is None:
        raise InputError(source, "hardware", primary.error)
    gpus = spec.pod.gpus if spec.pod.gpus is not None else primary.tp
    if spec.interference.pods_per_gpu > 1 and gpus > 1:
        raise InputError(source, "cluster.interference.pods_per_gpu", f"GPU sharing needs pods of one GPU, not {gpus}")
    env = simpy.Environment()
    rng = np.random.default_rng(seed)
    workload_rng, cluster_rng = rng.spawn(2)
    window_s, timeout_s = scenario.metrics_window_s, scenario.client_timeout_s
    cluster = ClusterSim(
        env, spec, builds, recorder, cluster_rng, window_s, primary.tp, timeout_s, primary.server_ttft_extra_s
    )
    requests = start_workload(
        env, scenario.workload, WorkloadContext(workload_rng, base), cluster.route, scenario.client
    )
    if requests is None and scenario.horizon_s is None:
        raise InputError(
            source,
            "horizon_s",
            "a cluster scenario whose requests are sent as the run goes (closed-loop clients, conversations) needs "
            "a horizon: set horizon_s (seconds)",
        )
    feeder = env.process(open_loop_source(env, requests, cluster.route)) if requests is not None else None
    run_until_done(env, cluster, feeder, scenario.horizon_s)
    cluster.close()
    return cluster, env.now


def run_until_done(
    env: simpy.Environment, cluster: ClusterSim, feeder: simpy.Process | None, horizon_s: float | None
) -> None:
    """Run to the horizon; without one, until the traffic is over and the cluster is idle, or nothing can
    serve what is left, or DRAIN_LIMIT_S after the last arrival."""
    if horizon_s is not None:
        env.run(until=horizon_s)
        return
    assert feeder is not None
    while not (feeder.triggered and (cluster.idle() or cluster.stuck() or env.now > drain_until(feeder))):
        env.run(until=env.now + CHUNK_S)


def drain_until(feeder: simpy.Process) -> float:
    """Without a horizon, requests still unserved this long after the traffic ends stay in flight."""
    return float(feeder.value) + DRAIN_LIMIT_S if isinstance(feeder.value, float) else float("inf")


def cluster_report(cluster: ClusterSim) -> ClusterReport:
    pods, series, hpa = cluster.frames()
    log = cluster.log
    return ClusterReport(pods, series, hpa, log.faults, cluster.cost(), log.pending_reasons, log)
