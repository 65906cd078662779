"""A custom controller (seed claim 11): the GPU memory-bandwidth signal by hand, the claim's rule as a
decision table, the pod it moves, and the loop adding and moving pods in small seeded runs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import simpy

from tests.cluster.factories import COST, FAST_POD, KV_BYTES_PER_TOKEN, NUM_BLOCKS, WEIGHT_BYTES, builds, cluster_spec
from tests.factories import engine_config, request
from ttftsim.cluster.bandwidth import BandwidthMeter, bytes_per_gpu
from ttftsim.cluster.cluster import ClusterSim
from ttftsim.cluster.controllers import busiest_pod, closed_loop_step, ttft_step
from ttftsim.cluster.placement import Node
from ttftsim.cluster.pod import Pod
from ttftsim.config.cluster_control import ClosedLoopController, TtftScaleOutController
from ttftsim.config.cluster_nodes import NodePool
from ttftsim.engine.data_parallel import serving_engine
from ttftsim.engine.recorder import Recorder
from ttftsim.workload.sources import open_loop_source

H100_BW = 3.35e12  # the H100-SXM5-80GB profile's peak memory bandwidth, bytes/s
CACHE_BYTES = NUM_BLOCKS * 16 * KV_BYTES_PER_TOKEN  # 200 blocks x 16 tokens x 128 KiB = 419,430,400 bytes


def _ready_pod(index: int = 0, node: Node | None = None) -> Pod:
    pool = NodePool(name="gpu", hardware="H100-SXM5-80GB", gpus_per_node=8)
    engine = builds("H100-SXM5-80GB").make(simpy.Environment(), Recorder(0.0), index, None)  # type: ignore[misc]
    pod = Pod(index, "serving", 0.0, state="ready", node=node or Node(0, pool, 8, state="ready"), engine=engine)
    pod.weight_bytes, pod.kv_bytes_per_token = WEIGHT_BYTES, KV_BYTES_PER_TOKEN
    return pod


def test_an_iteration_reads_the_weights_and_the_kv_cache_in_use() -> None:
    pod = _ready_pod()
    assert bytes_per_gpu(pod, 0.5, 1) == 16e9 + 0.5 * CACHE_BYTES == 16_209_715_200
    assert bytes_per_gpu(pod, 0.0, 3) == 48e9  # a closed-form decode run of three steps


def test_a_data_parallel_ranks_row_reads_its_own_gpus_counted_over_the_ranks() -> None:
    """Two DP engines of one GPU each in one pod (32 GB of weights over its two GPUs, each rank's own KV blocks):
    a rank's row reads its GPU's 16 GB and half its cache in use, counted as the mean over the two ranks (the
    meter sums both ranks' rows for the pod)."""
    pod = _ready_pod()
    pod.engine = serving_engine(
        simpy.Environment(), engine_config(dp=2), COST, NUM_BLOCKS, Recorder(0.0), lockstep=True
    )
    pod.weight_bytes = 2 * WEIGHT_BYTES
    assert bytes_per_gpu(pod, 0.5, 1) == (16e9 + 0.5 * CACHE_BYTES) / 2


def test_utilisation_is_bytes_read_in_the_window_over_window_times_peak_bandwidth() -> None:
    pod = _ready_pod()
    recorder = Recorder(0.0)
    meter = BandwidthMeter(recorder, lambda: [pod], window_s=1.0)
    recorder.step(0.2, 0.01, 0, 64, 1, 0, 0.5, 1)  # 16.21 GB inside (0, 1]
    recorder.step(0.95, 0.1, 0, 64, 1, 0, 0.0, 1)  # 16 GB, half of its 0.1 s inside
    expected = (16_209_715_200 + 8e9) / H100_BW
    assert meter.utilisation(pod, 1.0) == pytest.approx(expected, rel=1e-12)
    # one window later: the first row is gone, the second's other half is in (1, 2]
    assert meter.utilisation(pod, 2.0) == pytest.approx(8e9 / H100_BW, rel=1e-12)
    pod.state = "starting"
    assert math.isnan(meter.utilisation(pod, 2.0))


def test_pods_sharing_a_gpu_add_their_reads_as_the_gpus_counter_would() -> None:
    pool = NodePool(name="gpu", hardware="H100-SXM5-80GB", gpus_per_node=8)
    node = Node(0, pool, 8, state="ready", slots_per_gpu=2, gpu_of={0: 0, 1: 0, 2: 1})  # pods 0 and 1 on GPU 0
    pods = [_ready_pod(i, node) for i in range(3)]
    recorder = Recorder(0.0)
    meter = BandwidthMeter(recorder, lambda: pods, window_s=1.0)
    for replica in range(3):
        recorder.step(0.5, 0.01, replica, 64, 1, 0, 0.0, 1)  # 16 GB of weights each
    assert meter.utilisation(pods[0], 1.0) == meter.utilisation(pods[1], 1.0) == pytest.approx(32e9 / H100_BW)
    assert meter.utilisation(pods[2], 1.0) == pytest.approx(16e9 / H100_BW)
    assert meter.mean(pods, 1.0) == pytest.approx((32e9 + 32e9 + 16e9) / 3 / H100_BW)


@pytest.mark.parametrize(
    ("p99", "utilisation", "action"),
    [
        (0.6, 0.3, "add"),  # slow and the GPUs' memory is not the bottleneck: another replica
        (0.6, 0.6, "move"),  # slow and memory-bound (at the threshold counts as not below): move a pod
        (0.6, math.nan, "move"),  # no bandwidth sample: not shown to be below
        (0.5, 0.1, "hold"),  # at the threshold: not above
        (math.nan, 0.1, "hold"),  # no TTFT data
    ],
)
def test_the_claims_rule_as_a_decision_table(p99: float, utilisation: float, action: str) -> None:
    spec = ClosedLoopController(type="closed_loop", max_replicas=4)  # 0.5 s and 60 %: the claim's numbers
    assert closed_loop_step(spec, p99, utilisation) == action


def test_the_ttft_controller_adds_whenever_p99_is_above() -> None:
    spec = TtftScaleOutController(type="ttft_p99", max_replicas=4, ttft_p99_s=0.2)
    assert [ttft_step(spec, v) for v in (0.21, 0.2, math.nan)] == ["add", "hold", "hold"]


def test_the_pod_moved_is_the_newest_on_the_node_with_most_busy_pods() -> None:
    pool = NodePool(name="gpu", hardware="H100-SXM5-80GB", gpus_per_node=8)
    a, b = Node(0, pool, 8, state="ready"), Node(1, pool, 8, state="ready")
    pods = [_ready_pod(i, node) for i, node in enumerate((a, a, b, b, b))]
    for pod, busy in zip(pods, (1, 1, 1, 0, 0), strict=True):
        pod.outstanding = busy
    assert busiest_pod(pods) is pods[1]  # node 0: two busy pods; node 1: one busy of three
    assert busiest_pod(pods[1:3]) is None  # one pod per node: moving frees nothing


def _run(controller: dict[str, Any], pools: list[dict[str, Any]], num: int, until: float, **spec: Any) -> ClusterSim:
    env = simpy.Environment()
    cluster_cfg = cluster_spec(node_pools=pools, pod=FAST_POD, controller=controller, **spec)
    cluster = ClusterSim(env, cluster_cfg, builds, Recorder(0.0), np.random.default_rng(0), 10.0, 1)
    requests = [request(i, 1.0 + 0.05 * i, 200, 20) for i in range(num)]
    env.process(open_loop_source(env, requests, cluster.route))
    env.run(until=until)
    return cluster


def test_the_loop_adds_a_replica_then_waits_for_it_and_stops_at_max_replicas() -> None:
    pool = {"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 1, "initial_nodes": 2, "max_nodes": 2}
    controller = {"type": "ttft_p99", "ttft_p99_s": 0.001, "max_replicas": 2, "cooldown_s": 0}
    cluster = _run(controller, [pool], 1000, 61.0)
    assert cluster.controller is not None
    rows = cluster.controller.rows
    # 15 s: scrapes at 0 and 15 s hold first tokens, P99 above 1 ms: add; 30 s: the new pod (on the free
    # node, image there) is starting (15 s container + weights at 1.05 GB/s); 45 s: at max_replicas
    assert [(r["time_s"], r["action"]) for r in rows] == [
        (15.0, "add"),
        (30.0, "settling"),
        (45.0, "at max_replicas"),
        (60.0, "at max_replicas"),
    ]
    first, new = cluster.pods
    assert new.created_s == 15.0 and new.state == "ready" and new.node is not first.node  # the free node


def test_the_loop_moves_a_crowded_pod_to_another_node_and_drains_the_old_one() -> None:
    crowded = {"name": "a", "hardware": "H100-SXM5-80GB", "gpus_per_node": 2, "initial_nodes": 1, "max_nodes": 1}
    spare = {"name": "b", "hardware": "H100-SXM5-80GB", "gpus_per_node": 2, "initial_nodes": 1, "max_nodes": 1}
    pod_prefs = {**FAST_POD, "node_affinity": {"preferred": [{"weight": 100, "labels": {"pool": "a"}}]}}
    controller = {"type": "closed_loop", "ttft_p99_s": 0.001, "bandwidth_utilisation": 0.01, "max_replicas": 2}
    env = simpy.Environment()
    spec = cluster_spec(node_pools=[crowded, spare], pod=pod_prefs, controller=controller, replicas=2)
    cluster = ClusterSim(env, spec, builds, Recorder(0.0), np.random.default_rng(0), 10.0, 1)
    assert [p.node.index for p in cluster.pods] == [0, 0]  # type: ignore[union-attr]  # both on node 0
    requests = [request(i, 1.0 + 0.02 * i, 400, 50) for i in range(2000)]
    env.process(open_loop_source(env, requests, cluster.route))
    env.run(until=61.0)
    assert cluster.controller is not None
    first = cluster.controller.rows[0]
    assert first["action"] == "move" and first["bandwidth_utilisation"] > 0.01
    moved = cluster.pods[2]
    assert moved.created_s == 15.0 and moved.node is cluster.nodes[1]  # away from node 0
    assert moved.state == "ready" and cluster.pods[1].state in ("draining", "terminated")  # the newest goes
    assert cluster.pods[0].state == "ready" and len(cluster.lifecycle.serving()) == 2
