"""Pods from creation to their end: exact cold-start timelines on a bare node and on a node whose caches
the first pod left, a crash loop, the ReplicaSet's scale-down order, draining with and without the
grace period running out, the warm pool's promotion and refill."""

from __future__ import annotations

import pytest

from tests.cluster.factories import FAST_POD, GPU_POOL, cluster_sim, cluster_spec, crashing_builds
from tests.factories import request
from ttftsim.cluster.scale_down import pseudo_uid

SLOW_POD = {
    "image_bytes": 10e9,
    "registry_bytes_per_s": 1e9,
    "weights_source": "local_nvme",
    "container_start_s": 15,
    "compile_s": 20,
    "compile_cached_s": 6,
    "graph_capture_s": 10,
    "warmup_s": 2,
}


def test_cold_start_on_a_bare_node_then_a_second_pod_on_its_caches() -> None:
    spec = cluster_spec(node_pools=[{**GPU_POOL, "gpus_per_node": 2}], pod=SLOW_POD, start_warm=False)
    env, cluster = cluster_sim(spec)
    env.run(until=100)
    first = cluster.pods[0]
    # image 10 GB at 1 GB/s; 15 s container; 16 GB from local NVMe at 2 GB/s; no NCCL init at TP 1;
    # cold compile 20 s; graph capture 10 s; warm-up 2 s
    assert first.phases == [
        ("image_pull", 0.0, 10.0),
        ("container_start", 10.0, 25.0),
        ("weight_load", 25.0, 33.0),
        ("distributed_init", 33.0, 33.0),
        ("compile", 33.0, 53.0),
        ("graph_capture", 53.0, 63.0),
        ("warmup", 63.0, 65.0),
    ]
    assert (first.bound_s, first.ready_s, first.state) == (0.0, 65.0, "ready")
    cluster.scale_to(2)
    env.run(until=200)
    second = cluster.pods[1]
    # the node has the image, the weights in its page cache (16 GB at 7 GB/s) and a warm compile cache (6 s)
    weights = 16 / 7
    assert [name for name, _, _ in second.phases] == [name for name, _, _ in first.phases]
    assert [stop - start for _, start, stop in second.phases] == pytest.approx([0, 15, weights, 0, 6, 10, 2])
    assert second.ready_s == pytest.approx(100 + 15 + weights + 6 + 10 + 2)
    assert second.node is first.node and second.node is not None and second.node.gpu_of == {0: 0, 1: 1}


def test_weights_streamed_from_an_object_store_are_not_page_cached() -> None:
    pod = {**SLOW_POD, "weights_source": "object_store"}
    spec = cluster_spec(node_pools=[{**GPU_POOL, "gpus_per_node": 2}], pod=pod, start_warm=False)
    env, cluster = cluster_sim(spec)
    env.run(until=100)
    cluster.scale_to(2)
    env.run(until=300)
    loads = [stop - start for pod in cluster.pods for name, start, stop in pod.phases if name == "weight_load"]
    assert loads == pytest.approx([16e9 / 0.31e9] * 2)  # both read 16 GB at 0.31 GB/s


def test_an_engine_that_does_not_start_crash_loops_after_its_weight_load() -> None:
    spec = cluster_spec(pod=SLOW_POD, start_warm=False)
    env, cluster = cluster_sim(spec, builds=crashing_builds)
    env.run(until=100)
    pod = cluster.pods[0]
    assert [name for name, _, _ in pod.phases] == ["image_pull", "container_start", "weight_load"]
    assert (pod.state, pod.end_reason) == ("crashloop", "engine does not start on H100-SXM5-80GB: too big")
    assert pod.engine is None and cluster.nodes[0].used_gpus == 1  # it keeps its GPU
    assert cluster.stuck()  # nothing starting or ready, no node on its way


def test_scale_down_removes_pending_then_starting_then_the_most_recently_ready() -> None:
    spec = cluster_spec(node_pools=[{**GPU_POOL, "gpus_per_node": 4, "max_nodes": 1}], pod=FAST_POD)
    env, cluster = cluster_sim(spec)
    lifecycle = cluster.lifecycle
    for at, replicas in (
        (10, 2),
        (20, 3),
    ):  # pods 1 and 2 cold-start on the node's caches: Ready 1 + 16/7 + 1 + 1 s later
        env.run(until=at)
        lifecycle.scale_to(replicas)
    env.run(until=30)
    lifecycle.scale_to(5)  # pod 3 takes the last GPU (starting), pod 4 finds none (pending; max_nodes 1)
    env.run(until=30.5)
    assert [p.state for p in cluster.pods] == ["ready", "ready", "ready", "starting", "pending"]
    lifecycle.scale_to(4)  # the pending pod goes first ...
    assert [(p.index, p.state) for p in cluster.pods[3:]] == [(3, "starting"), (4, "terminated")]
    lifecycle.scale_to(3)  # ... then the starting one
    assert [(p.index, p.ended_s) for p in cluster.pods if p.state == "terminated"] == [(3, 30.5), (4, 30.5)]
    assert cluster.pods[3].phases == [
        ("image_pull", 30.0, 30.0)
    ]  # a phase is logged when it ends: not its container start
    lifecycle.scale_to(2)  # ready 0 s, 15.29 s and 25.29 s: the last one goes
    assert [p.state for p in cluster.pods] == ["ready", "ready", "terminated", "terminated", "terminated"]
    assert {p.end_reason for p in cluster.pods[2:]} == {"scaled down"}
    assert lifecycle.desired == 2 and cluster.nodes[0].gpu_of == {0: 0, 1: 1}


def test_a_draining_pod_ends_with_its_last_request_or_when_the_grace_period_runs_out() -> None:
    pool = {**GPU_POOL, "gpus_per_node": 2}
    spec = cluster_spec(node_pools=[pool], pod={**FAST_POD, "termination_grace_s": 5}, replicas=2)
    env, cluster = cluster_sim(spec)
    env.run(until=1.0)
    cluster.route(request(0, 1.0, 100, 5))  # round robin: pod 0
    cluster.route(request(1, 1.0, 100, 2000))  # pod 1, decoding for more than 12 s
    env.run(until=2.0)
    # both Ready at 0 s on one node, created at 0 s: no rule tells them apart but the UID, pod 1's first
    assert pseudo_uid(1) < pseudo_uid(0)
    cluster.scale_to(1)  # pod 1 goes; it still streams request 1
    assert [p.state for p in cluster.pods] == ["ready", "draining"]
    env.run(until=10.0)
    pod = cluster.pods[1]
    assert (pod.state, pod.ended_s, pod.end_reason) == ("terminated", 7.0, "scaled down (grace period over)")
    rows = cluster.lifecycle.recorders.serving.requests_frame().set_index("request_id")
    assert rows.loc[1, "status"] == "failed"  # it had streamed tokens: not retried by default
    assert rows.loc[1, "reason"] == "replica 1 scaled down (grace period over) (attempt 1)"
    cluster.route(request(2, 10.0, 100, 5))
    cluster.scale_to(2)
    env.run(until=20.0)
    # round robin: request 3 to pod 0, 4 to pod 2
    cluster.route(request(3, 20.0, 100, 5))
    cluster.route(request(4, 20.0, 100, 5))
    cluster.scale_to(1)  # pod 0 (Ready 20 s ago, log2 bucket 34) stays; pod 2 (4.71 s ago, bucket 32) drains
    env.run(until=30.0)
    done = cluster.lifecycle.recorders.serving.requests_frame().set_index("request_id")
    assert list(done.loc[[3, 4], "replica"]) == [0, 2] and set(done.loc[[3, 4], "status"]) == {"finished"}
    assert cluster.pods[2].ended_s == done.loc[4, "finish_s"]  # ended with its last request, not at 25 s
    assert cluster.pods[2].end_reason == "scaled down"


def test_a_scale_up_promotes_a_ready_warm_pod_and_refills_the_pool() -> None:
    spec = cluster_spec(node_pools=[{**GPU_POOL, "gpus_per_node": 4}], pod=FAST_POD, warm_pool=1)
    env, cluster = cluster_sim(spec)
    env.run(until=5.0)
    assert [(p.index, p.role, p.state) for p in cluster.pods] == [(0, "serving", "ready"), (1, "warm", "ready")]
    cluster.scale_to(2)
    assert [p.index for p in cluster.gateway.routable] == [0, 1]  # at once, no cold start
    refill = cluster.pods[2]
    assert (refill.role, refill.state, refill.created_s) == ("warm", "starting", 5.0)
    env.run(until=60.0)
    assert refill.ready_s == pytest.approx(5 + 1 + 16 / 7 + 1 + 1)  # on the node's caches
    assert [p.index for p in cluster.gateway.routable] == [0, 1]  # a warm pod takes no traffic
