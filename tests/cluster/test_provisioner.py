"""The provisioner on its own: which nodes it adds for pods without room and when they are Ready, what it
removes, what it says about pods no pool can take; every time and node id worked by hand."""

from __future__ import annotations

from typing import Any

import simpy

from tests.cluster.factories import cluster_spec
from ttftsim.cluster.placement import PodShape
from ttftsim.cluster.provisioner import Provisioner


def provisioner(
    pools: list[dict[str, Any]], shape: PodShape, **fields: Any
) -> tuple[simpy.Environment, Provisioner, list[float]]:
    """A started provisioner on a fresh environment, and the times it reported a node Ready."""
    env, ready_at = simpy.Environment(), []
    spec = cluster_spec(node_pools=pools, **fields)
    prov = Provisioner(env, spec, shape, lambda: ready_at.append(env.now))
    prov.start()
    return env, prov, ready_at


def pool(name: str = "gpu", **fields: Any) -> dict[str, Any]:
    return {"name": name, "hardware": "H100-SXM5-80GB", "gpus_per_node": 2, "initial_nodes": 0, **fields}


def test_karpenter_adds_a_node_per_pod_without_room_counting_nodes_already_on_their_way() -> None:
    env, prov, ready_at = provisioner([pool(max_nodes=3, provision_s=30)], PodShape(1))
    prov.provision(3)  # node 0 takes pods 1 and 2 (2 GPUs), node 1 pod 3
    assert [(n.index, n.state, n.requested_s) for n in prov.nodes] == [
        (0, "provisioning", 0.0),
        (1, "provisioning", 0.0),
    ]
    prov.provision(3)  # the same 3 pods asked again: 4 pods of room on the way, no new node
    assert len(prov.nodes) == 2
    prov.provision(5)  # the fifth has no room: node 2
    assert len(prov.nodes) == 3
    prov.provision(7)  # the sixth fits node 2's second GPU; the seventh would need a fourth node (max_nodes 3)
    assert len(prov.nodes) == 3
    env.run(until=60)
    # Karpenter batches for 1 s, then 30 s of provisioning: all three Ready at 31 s, each reported once
    assert ready_at == [31.0, 31.0, 31.0]
    assert [(n.state, n.ready_s, n.empty_since_s) for n in prov.nodes] == [("ready", 31.0, 31.0)] * 3


def test_cluster_autoscaler_waits_for_its_next_10_s_scan() -> None:
    env, prov, ready_at = provisioner(
        [pool(max_nodes=4, provision_s=30, provisioner="cluster-autoscaler")], PodShape(2)
    )
    env.run(until=3)
    prov.provision(1)  # scan at 10 s, then 30 s: Ready at 40 s
    env.run(until=10)
    prov.provision(2)  # asked at 10 s, the scan at 10 s has run: the next at 20 s, Ready at 50 s
    env.run(until=100)
    assert [(n.requested_s, n.ready_s) for n in prov.nodes] == [(3.0, 40.0), (10.0, 50.0)]
    assert ready_at == [40.0, 50.0]


def test_first_pool_with_room_whose_empty_node_takes_the_pod_gets_it() -> None:
    full = pool("full", initial_nodes=1, max_nodes=1)
    tainted = pool("tainted", max_nodes=4, taints=[{"key": "spot", "effect": "NoSchedule"}])
    _env, prov, _ = provisioner([full, tainted, pool("open", max_nodes=4)], PodShape(1))
    prov.provision(2)  # node 0 (full) is ready and counts no room: the pool "open" adds node 1
    assert [(n.index, n.pool.name, n.state) for n in prov.nodes] == [(0, "full", "ready"), (1, "open", "provisioning")]


def test_a_pod_larger_than_a_node_gets_a_gang_of_whole_nodes() -> None:
    _env, prov, _ = provisioner([pool(gpus_per_node=8, max_nodes=5)], PodShape(16))
    prov.provision(1)  # 16 GPUs on 8-GPU nodes: two nodes, each half a pod of room
    assert [n.index for n in prov.nodes] == [0, 1]
    prov.provision(1)  # 0.5 + 0.5 = one pod on the way: nothing more
    prov.provision(2)  # a second pod: two more nodes (4 of 5); a third would need 6
    prov.provision(3)
    assert [n.index for n in prov.nodes] == [0, 1, 2, 3]


def test_pods_an_empty_node_takes_is_the_tightest_of_gpus_cpus_memory_and_anti_affinity() -> None:
    _env, prov, _ = provisioner(
        [pool(gpus_per_node=8, initial_nodes=1)], PodShape(2), pod={"cpus": 30, "memory_gib": 64, "max_per_node": 2}
    )
    node = prov.nodes[0]
    assert prov.pods_fitting(node) == 2  # GPUs 8 // 2 = 4, CPUs 96 // 30 = 3, memory 1024 // 64 = 16, anti-affinity 2
    _env, prov, _ = provisioner(
        [pool(gpus_per_node=8, initial_nodes=1)], PodShape(1, pods_per_gpu=3), interference={"pods_per_gpu": 3}
    )
    assert prov.pods_fitting(prov.nodes[0]) == 12  # GPU slots 8 x 3 = 24, CPUs 96 // 8 = 12


def test_empty_nodes_are_removed_after_the_unneeded_time_down_to_min_nodes() -> None:
    env, prov, _ = provisioner([pool(initial_nodes=3, min_nodes=1, scale_down_unneeded_s=25)], PodShape(1))
    env.process(prov.removal_loop())
    prov.nodes[1].pods.append(7)  # node 1 holds a pod
    env.run(until=25)  # checked at 10 and 20 s: empty since 0 s, not yet 25 s
    assert [n.state for n in prov.nodes] == ["ready"] * 3
    env.run(until=31)  # at 30 s: node 0 goes (3 alive > 1), node 1 is busy, node 2 goes (2 alive > 1)
    assert [(n.state, n.ended_s) for n in prov.nodes] == [("removed", 30.0), ("ready", -1.0), ("removed", 30.0)]
    prov.nodes[1].pods.clear()
    prov.nodes[1].empty_since_s = 31.0
    env.run(until=100)  # the last node stays: min_nodes 1
    assert prov.nodes[1].state == "ready"


def test_a_node_failure_takes_the_index_th_ready_node_and_reasons_name_each_pool() -> None:
    _env, prov, _ = provisioner(
        [pool("small", initial_nodes=2, max_nodes=2, cpus=4), pool("big", initial_nodes=1, max_nodes=1)], PodShape(1)
    )
    prov.nodes[0].state = "removed"
    failed = prov.fail(1)  # ready nodes: 1, 2 -> node 2
    assert failed is prov.nodes[2] and (failed.state, failed.ended_s) == ("failed", 0.0)
    assert prov.fail(1) is None  # only node 1 is ready now
    assert prov.unschedulable() == ["pool small: cpu request 8 > 4 allocatable", "pool big: room expected"]
    prov.nodes[2].state = "ready"
    assert prov.unschedulable()[1] == "pool big: full at max_nodes 1"
