"""Multi-node pods with and without a gang scheduler (seed claim 5), worked by hand on 8-GPU nodes and
16-GPU pods (groups of a leader and one worker, 8 GPUs each)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cluster.factories import FAST_POD, cluster_sim, cluster_spec
from ttftsim.cluster.gangs import member_gang, missing_members, place_members
from ttftsim.cluster.placement import Binder, Gang, Node, PodShape
from ttftsim.cluster.pod import Pod
from ttftsim.config.cluster import Cluster
from ttftsim.config.cluster_nodes import NodePool, PodSpec


def _spec(gang: bool, initial: int = 4, most: int = 6) -> Cluster:
    pool = {"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": 8, "initial_nodes": initial}
    return cluster_spec(
        node_pools=[{**pool, "max_nodes": most, "images_cached": True}],
        pod={**FAST_POD, "gpus": 16, "gang_scheduling": gang},
    )


def _held(cluster: Any) -> list[list[int]]:
    return [[n.index for n in p.nodes] for p in cluster.pods]


def test_with_a_gang_scheduler_one_new_group_takes_both_free_nodes_and_the_other_waits_whole() -> None:
    env, cluster = cluster_sim(_spec(gang=True), tp=16)
    taken = set(_held(cluster)[0])
    assert len(taken) == 2  # the running group: a leader and a worker node
    cluster.scale_to(3)  # two new groups, two free nodes: one group gets both
    first, second = cluster.pods[1], cluster.pods[2]
    assert first.state == "starting" and set(n.index for n in first.nodes) == {0, 1, 2, 3} - taken
    assert second.state == "pending" and second.nodes == []
    assert [n.state for n in cluster.nodes[4:]] == ["provisioning", "provisioning"]  # a gang of two new nodes
    env.run(until=400.0)
    assert first.bound_s == 0.0 and second.bound_s == 181.0  # Karpenter's 1 s batch + 180 s
    assert first.ready_s < 60.0 and second.ready_s > 181.0


def test_without_a_gang_scheduler_both_leaders_take_a_free_node_and_both_groups_wait_for_new_nodes() -> None:
    env, cluster = cluster_sim(_spec(gang=False), tp=16)
    taken = set(_held(cluster)[0])  # the running group is placed at time 0
    cluster.scale_to(3)
    first, second = cluster.pods[1], cluster.pods[2]
    # leaders first: each new group's leader takes one of the two free nodes, no worker fits anywhere
    assert first.state == second.state == "pending"
    assert {first.node.index, second.node.index} == {0, 1, 2, 3} - taken  # type: ignore[union-attr]
    assert first.workers == [] and second.workers == []
    assert [n.used_gpus for n in cluster.nodes] == [8, 8, 8, 8, 0, 0]
    assert [n.state for n in cluster.nodes[4:]] == ["provisioning", "provisioning"]  # one node per worker
    env.run(until=400.0)
    # both workers land at 181 s, on node 4 (ready first) and node 5: neither group served before then
    assert first.bound_s == second.bound_s == 181.0
    assert [first.workers[0].index, second.workers[0].index] == [4, 5]
    assert first.state == second.state == "ready"
    assert first.phases[0] == ("pending", 0.0, 181.0)


def test_without_a_gang_scheduler_and_no_room_to_grow_the_partial_groups_deadlock() -> None:
    env, cluster = cluster_sim(_spec(gang=False, initial=4, most=4), tp=16)
    cluster.scale_to(3)
    env.run(until=600.0)
    first, second = cluster.pods[1], cluster.pods[2]
    assert first.state == second.state == "pending"  # each holds one node of two, forever
    assert [len(p.nodes) for p in (first, second)] == [1, 1]
    assert cluster.nodes[0].used_gpus + cluster.nodes[1].used_gpus + cluster.nodes[2].used_gpus == 24
    env, gang = cluster_sim(_spec(gang=True, initial=4, most=4), tp=16)
    gang.scale_to(3)
    env.run(until=600.0)
    assert [p.state for p in gang.pods] == ["ready", "ready", "pending"]  # all or nothing: one group serves


def test_scaling_down_a_partial_group_gives_its_nodes_back() -> None:
    _env, cluster = cluster_sim(_spec(gang=False, initial=4, most=4), tp=16)
    cluster.scale_to(3)
    cluster.scale_to(2)  # the ReplicaSet order removes a pending pod first; its leader's node is free again
    states = [p.state for p in cluster.pods]
    assert states.count("terminated") == 1
    survivor = next(p for p in cluster.pods[1:] if p.state != "terminated")
    assert sorted(n.used_gpus for n in cluster.nodes) == [8, 8, 8, 8]  # the survivor took the freed node
    assert len(survivor.nodes) == 2 and survivor.state == "starting" and survivor.bound_s == 0.0


def _nodes(count: int) -> list[Node]:
    pool = NodePool(name="gpu", hardware="H100-SXM5-80GB", gpus_per_node=8, max_nodes=8)
    return [Node(i, pool, 8, state="ready") for i in range(count)]


def test_members_bind_leaders_first_in_creation_order() -> None:
    nodes = _nodes(3)
    binder = Binder(PodSpec(gpus=16), [nodes[0].pool], PodShape(16), np.random.default_rng(0))
    gang = member_gang(binder)
    assert gang == Gang(2, 8)
    pods = [Pod(0, "serving", 0.0), Pod(1, "serving", 0.0)]
    place_members(binder, pods, nodes, gang)
    # round 0: both leaders (3 free nodes, one taken each); round 1: pod 0's worker takes the last node
    assert [len(p.nodes) for p in pods] == [2, 1]
    assert missing_members(pods, gang) == 1
    assert sorted(n.used_gpus for n in nodes) == [8, 8, 8]
    assert binder.shares == {0: 8, 1: 8}
    binder.release(1, pods[1].nodes, now=5.0)
    assert sorted(n.used_gpus for n in nodes) == [0, 8, 8]


def test_no_member_pods_when_a_node_holds_the_whole_pod() -> None:
    pool = NodePool(name="gpu", hardware="H100-SXM5-80GB", gpus_per_node=8)
    assert member_gang(Binder(PodSpec(gpus=8), [pool], PodShape(8), np.random.default_rng(0))) is None


def test_the_provisioner_adds_a_node_per_member_pod_less_those_on_their_way() -> None:
    _env, cluster = cluster_sim(_spec(gang=False, initial=2, most=5), tp=16)
    gang = Gang(2, 8)
    cluster.provisioner.provision_members(2, gang)
    assert [n.state for n in cluster.nodes] == ["ready", "ready", "provisioning", "provisioning"]
    cluster.provisioner.provision_members(3, gang)  # two on their way: one more, the fifth and last
    cluster.provisioner.provision_members(4, gang)  # max_nodes 5 reached: none
    assert len(cluster.nodes) == 5


@pytest.mark.parametrize("gang", [True, False])
def test_single_node_pods_place_the_same_with_or_without_a_gang_scheduler(gang: bool) -> None:
    spec = cluster_spec(pod={**FAST_POD, "gang_scheduling": gang}, replicas=1)
    env, cluster = cluster_sim(spec)
    cluster.scale_to(2)
    env.run(until=400.0)
    assert [(p.state, p.bound_s) for p in cluster.pods] == [("ready", 0.0), ("ready", 181.0)]


def test_a_gang_waiting_for_its_second_new_node_asks_for_no_more_nodes() -> None:
    spec = _spec(gang=True, initial=2, most=8).model_copy(update={"replicas": 2, "start_warm": False})
    env, cluster = cluster_sim(spec, tp=16)
    assert [n.state for n in cluster.nodes] == ["ready", "ready", "provisioning", "provisioning"]
    env.run(until=200.0)
    # at 181 s node 2 is ready, node 3 a moment later: the first counts half a group of room, the node
    # on its way the other half, so no third pair of nodes is asked for in between
    assert len(cluster.nodes) == 4
    assert [p.bound_s for p in cluster.pods] == [0.0, 181.0]


@st.composite
def _group_cases(draw: Any) -> dict[str, Any]:
    per_node = draw(st.sampled_from([4, 8]))
    pool = {"name": "gpu", "hardware": "H100-SXM5-80GB", "gpus_per_node": per_node, "images_cached": True}
    pool |= {"initial_nodes": draw(st.integers(0, 4)), "max_nodes": draw(st.integers(4, 7))}
    pool["provision_s"] = draw(st.sampled_from([0.0, 30.0]))
    faults = st.fixed_dictionaries({"at_s": st.floats(0, 90), "kind": st.just("node"), "index": st.integers(0, 3)})
    return {
        "spec": {
            "node_pools": [pool],
            "pod": {
                **FAST_POD,
                "gpus": draw(st.sampled_from([per_node + 1, 2 * per_node])),
                "gang_scheduling": draw(st.booleans()),
            },
            "replicas": draw(st.integers(1, 3)),
            "start_warm": draw(st.booleans()),
            "faults": draw(st.lists(faults, max_size=2)),
        },
        "scale": draw(st.lists(st.tuples(st.floats(0, 90), st.integers(1, 4)), max_size=3)),
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_group_cases())
def test_a_nodes_gpus_are_the_shares_of_the_groups_holding_it_with_or_without_a_gang_scheduler(
    case: dict[str, Any],
) -> None:
    spec = case["spec"]
    env, cluster = cluster_sim(
        cluster_spec(**{k: v for k, v in spec.items() if k != "node_pools"}, node_pools=spec["node_pools"]),
        tp=spec["pod"]["gpus"],
    )
    for at_s, replicas in sorted(case["scale"]):
        if at_s > env.now:
            env.run(until=at_s)
        cluster.scale_to(replicas)
    env.run(until=300.0)
    holding = ("pending", "starting", "ready", "crashloop", "draining")
    for node in cluster.nodes:
        held = [p for p in cluster.pods if node in p.nodes and p.state in holding]
        assert sorted(node.pods) == sorted(p.index for p in held)
        assert node.used_gpus == sum(cluster.binder.shares[p.index] for p in held) <= node.gpus
    for pod in cluster.pods:
        assert len({n.index for n in pod.nodes}) == len(pod.nodes)  # one member per node
        if pod.state in ("starting", "ready", "draining"):
            assert len(pod.nodes) == math.ceil(spec["pod"]["gpus"] / spec["node_pools"][0]["gpus_per_node"])
        if spec["pod"]["gang_scheduling"] and pod.state == "pending":
            assert pod.nodes == []  # all or nothing
