"""Small factories for the cluster's tests: a replica with a known linear step cost, a fast cold start,
and a cluster section from a few fields."""

from __future__ import annotations

from typing import Any

import numpy as np
import simpy

from tests.factories import engine_config
from ttftsim.cluster.cluster import ClusterSim
from ttftsim.cluster.pod import ReplicaBuild, Wrap
from ttftsim.config.cluster import Cluster
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import Recorder
from ttftsim.perf.linear import LinearStepModel

COST = LinearStepModel(0.005, 0.0002, 0.00001)  # s per iteration, per computed token, per KV token read
NUM_BLOCKS = 200
KV_BYTES_PER_TOKEN = 131072.0  # Llama-3-8B in bf16
WEIGHT_BYTES = 16e9
FAST_POD = {"container_start_s": 1, "compile_s": 1, "compile_cached_s": 1, "graph_capture_s": 1, "warmup_s": 0}
GPU_POOL = {"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 1, "initial_nodes": 1}


def builds(hardware: str) -> ReplicaBuild:
    """The same replica on every hardware: 16 GB of weights, TP 1, COST, NUM_BLOCKS KV blocks."""
    cfg = engine_config(max_num_seqs=8, max_num_batched_tokens=256)

    def make(env: simpy.Environment, recorder: Recorder, index: int, wrap: Wrap | None) -> Engine:
        return Engine(env, cfg, COST if wrap is None else wrap(COST), NUM_BLOCKS, recorder, replica=index)

    return ReplicaBuild(make, WEIGHT_BYTES, 1, True, True, "", KV_BYTES_PER_TOKEN)


def crashing_builds(hardware: str) -> ReplicaBuild:
    """A replica that does not start on any hardware (the model does not fit)."""
    return ReplicaBuild(None, WEIGHT_BYTES, 1, True, True, f"engine does not start on {hardware}: too big")


def cluster_spec(**fields: Any) -> Cluster:
    """A cluster section: one pool of 1-GPU H100 nodes (one up at the start) unless node_pools is given."""
    return Cluster.model_validate({"node_pools": [GPU_POOL], **fields})


def cluster_sim(spec: Cluster, seed: int = 0, tp: int = 1, **options: Any) -> tuple[simpy.Environment, ClusterSim]:
    """A wired cluster on a fresh environment (metrics window 10 s), nothing run yet."""
    env = simpy.Environment()
    recorder = options.pop("recorder", Recorder(0.0))
    make = options.pop("builds", builds)
    cluster = ClusterSim(env, spec, make, recorder, np.random.default_rng(seed), 10.0, tp, **options)
    return env, cluster
