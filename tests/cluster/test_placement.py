"""kube-scheduler filters and scores on a small cluster, and the binder's gangs and GPU slots, worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ttftsim.cluster.placement import Binder, Gang, Node, PodShape, passes_filters, pick_node, scores
from ttftsim.config.cluster_nodes import NodePool, PodSpec


def pool(name: str, **fields: object) -> NodePool:
    return NodePool.model_validate(
        {"name": name, "hardware": "H100-SXM5-80GB", "cpus": 100, "memory_gib": 1000, **fields}
    )


def node(index: int, p: NodePool, total: int = 8, **used: float) -> Node:
    n = Node(index, p, total, state="ready")
    n.used_cpus, n.used_memory_gib = used.get("cpus", 0.0), used.get("memory", 0.0)
    n.used_gpus = int(used.get("gpus", 0))
    return n


def test_filters_gpu_fit_required_affinity_taints_and_anti_affinity() -> None:
    gpu = pool("gpu", labels={"accel": "h100"}, taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
    pod = PodSpec(gpus=2, node_affinity={"required": {"accel": "h100"}}, max_per_node=1)
    tolerant = PodSpec.model_validate({**pod.model_dump(), "tolerations": [{"key": "nvidia.com/gpu"}]})
    assert not passes_filters(node(0, gpu), pod, 2)  # NoSchedule taint not tolerated
    assert passes_filters(node(0, gpu), tolerant, 2)
    assert not passes_filters(node(0, gpu, gpus=7), tolerant, 2)  # 1 GPU left
    crowded = node(0, gpu)
    crowded.pods = [5]
    assert not passes_filters(crowded, tolerant, 2)  # anti-affinity: at most 1 per node
    cpu_pool = pool("cpu", hardware="CPU-host")
    assert not passes_filters(node(1, cpu_pool, total=0), tolerant, 2)  # no GPUs at all
    assert passes_filters(node(1, cpu_pool, total=0), PodSpec(gpus=0), 0)  # no GPU request: a CPU node will do


def test_scores_weighted_sum_by_hand() -> None:
    a = pool("a", labels={"zone": "1"})
    b = pool("b", labels={"zone": "2"}, taints=[{"key": "spot", "effect": "PreferNoSchedule"}])
    pod = PodSpec(cpus=10, memory_gib=100, node_affinity={"preferred": [{"weight": 50, "labels": {"zone": "2"}}]})
    n_a, n_b = node(0, a, cpus=40, memory=100), node(1, b)
    total_a, total_b = scores([n_a, n_b], pod, 1, 2)
    # a: taint 100 (b has the only untolerated PreferNoSchedule) x3 = 300; affinity 0;
    #    cpu (40+10)/100 = 0.5, memory (100+100)/1000 = 0.2 -> least (50 + 80) / 2 = 65; balanced (1 - 0.15) = 85
    assert total_a == pytest.approx(300 + 0 + 65 + 85)
    # b: taint 100 - 100 * 1/1 = 0; affinity 100 x2 = 200; cpu 0.1, memory 0.1 -> least 90, balanced 100
    assert total_b == pytest.approx(0 + 200 + 90 + 100)


def test_image_locality_and_random_tie_break_is_seeded() -> None:
    p = pool("p")
    cached, bare = node(0, p), node(1, p)
    cached.image_cached = True
    pod = PodSpec(image_bytes=2e9)
    # spread = 2e9 * 1 holder / 2 nodes = 1e9 -> clamped to 1000 MB -> 100 points for the cached node
    assert scores([cached, bare], pod, 1, 2)[0] - scores([cached, bare], pod, 1, 2)[1] == pytest.approx(100)
    assert pick_node([bare, cached], pod, 1, np.random.default_rng(0)) is cached
    twins = [node(0, p), node(1, p), node(2, p)]
    # three equal scores: the bound node is twins[rng.integers(3)], and default_rng(seed)'s first integers(3)
    # for seeds 0..11 is 2, 1, 2, 2, 2, 2, 1, 2, 2, 1, 2, 0
    picks = [pick_node(twins, PodSpec(), 1, np.random.default_rng(seed)).index for seed in range(12)]  # type: ignore[union-attr]
    assert picks == [2, 1, 2, 2, 2, 2, 1, 2, 2, 1, 2, 0]
    # two equal scores: default_rng(seed)'s first integers(2) for seeds 0..4 is 1, 0, 1, 1, 1
    pairs = [pick_node(twins[:2], PodSpec(), 1, np.random.default_rng(seed)).index for seed in range(5)]  # type: ignore[union-attr]
    assert pairs == [1, 0, 1, 1, 1]
    assert pick_node([node(0, p, total=0)], PodSpec(gpus=1), 1, np.random.default_rng(0)) is None


def test_a_tp_group_larger_than_a_node_spreads_evenly_over_whole_nodes() -> None:
    assert PodShape(4).gang(8) == Gang(1, 4)
    assert PodShape(16).gang(8) == Gang(2, 8)
    assert PodShape(16).gang(6) == Gang(3, 6)  # ceil(16 / 6) = 3 nodes, ceil(16 / 3) = 6 GPUs on each
    assert PodShape(12).gang(8) == Gang(2, 6)
    assert PodShape(3).gang(0) == Gang(1, 3)  # a node without GPUs is never part of a gang


def test_binder_gangs_whole_free_nodes_all_or_nothing_and_gives_everything_back() -> None:
    p = pool("p")
    nodes = [node(0, p, gpus=4), node(1, p), node(2, p)]
    binder = Binder(PodSpec(gpus=16), [p], PodShape(16), np.random.default_rng(0))
    # no node has 16 GPUs: a gang of two 8-GPU nodes; node 0 has 4 left, nodes 1 and 2 tie for the leader
    # and default_rng(0)'s first integers(2) is 1 (node 2); node 1 is the only one left for the worker
    chosen = binder.pick(nodes)
    assert [n.index for n in chosen or []] == [2, 1]
    binder.bind(5, [nodes[2], nodes[1]])
    assert [(n.pods, n.gpu_of, n.used_gpus, n.used_cpus, n.used_memory_gib) for n in nodes[1:]] == [
        ([5], {5: 0}, 8, 8.0, 64.0)
    ] * 2
    assert binder.pick(nodes) is None  # one node with 8 free is not a gang: nothing is bound
    assert nodes[0].pods == [] and nodes[0].used_gpus == 4
    binder.release(5, [nodes[2], nodes[1]], now=7.0)
    assert [(n.pods, n.gpu_of, n.used_gpus, n.used_cpus, n.empty_since_s) for n in nodes[1:]] == [
        ([], {}, 0, 0.0, 7.0)
    ] * 2


def test_time_sliced_pods_take_the_lowest_gpu_with_a_free_slot() -> None:
    p = pool("p")
    shared = node(0, p, total=2)
    shared.slots_per_gpu = 2
    binder = Binder(PodSpec(gpus=1), [p], PodShape(1, pods_per_gpu=2), np.random.default_rng(0))
    for index in range(3):
        binder.bind(index, [shared])
    assert shared.gpu_of == {0: 0, 1: 0, 2: 1}  # two pods on GPU 0, the third on GPU 1
    binder.release(0, [shared], now=1.0)
    binder.bind(3, [shared])
    assert shared.gpu_of == {1: 0, 2: 1, 3: 0}  # GPU 0's freed slot
    assert shared.used_gpus == 3 and shared.fits(PodSpec(gpus=1), 1)  # 4 slots, 3 taken


def test_pods_without_a_gpu_request_fit_any_number_on_a_cpu_node() -> None:
    cpu = node(0, pool("cpu", hardware="CPU-host"), total=0)
    binder = Binder(PodSpec(gpus=0), [cpu.pool], PodShape(0), np.random.default_rng(0))
    for index in range(3):  # was: StopIteration at the third (ids ran out at the node's GPUs + 1)
        assert binder.pick([cpu]) == [cpu]
        binder.bind(index, [cpu])
    assert cpu.gpu_of == {0: 0, 1: 1, 2: 2} and cpu.used_gpus == 0 and cpu.used_cpus == 24.0
