"""Injected failures: which node or pod each index names, what is logged, and the ReplicaSet's
replacements (exact pod and node ids)."""

from __future__ import annotations

from tests.cluster.factories import FAST_POD, GPU_POOL, cluster_sim, cluster_spec
from ttftsim.config.cluster import Fault


def test_a_pod_fault_counts_live_serving_and_prefill_pods_skipping_warm_ones() -> None:
    spec = cluster_spec(
        node_pools=[{**GPU_POOL, "gpus_per_node": 8}],
        pod=FAST_POD,
        replicas=2,
        warm_pool=1,
        disaggregation={"prefill_replicas": 1},
        faults=[{"at_s": 4.0, "kind": "pod", "index": 2}],
    )
    env, cluster = cluster_sim(spec)
    assert [p.role for p in cluster.pods] == ["serving", "serving", "warm", "prefill"]
    env.run(until=10.0)
    # live pods other than warm ones: 0, 1, 3 -> index 2 is the prefill pod; its replacement is pod 4
    assert cluster.faults.log == [{"time_s": 4.0, "kind": "pod", "index": 2, "pods": [3]}]
    lost, replacement = cluster.pods[3], cluster.pods[4]
    assert (lost.state, lost.ended_s, lost.end_reason) == ("failed", 4.0, "lost in a pod failure")
    assert (replacement.role, replacement.created_s, replacement.bound_s) == ("prefill", 4.0, 4.0)


def test_a_node_fault_fails_every_pod_on_it_and_a_missing_node_is_logged() -> None:
    spec = cluster_spec(
        node_pools=[{**GPU_POOL, "gpus_per_node": 2, "initial_nodes": 2, "max_nodes": 3, "provision_s": 60}],
        pod=FAST_POD,
        replicas=3,
        faults=[{"at_s": 5.0, "kind": "node", "index": 1}, {"at_s": 6.0, "kind": "node", "index": 5}],
    )
    env, cluster = cluster_sim(spec)
    on_node = [[p.index for p in cluster.pods if p.node is n] for n in cluster.nodes]
    # pod 0: a tie, default_rng(0)'s first integers(2) is 1 (node 1); pod 1: node 0, the less allocated;
    # pod 2: a tie again, the second draw is 1 (node 1)
    assert on_node == [[1], [0, 2]]
    env.run(until=10.0)
    assert cluster.faults.log == [
        {"time_s": 5.0, "kind": "node", "index": 1, "pods": [0, 2]},
        {"time_s": 6.0, "kind": "node", "index": 5, "effect": "no such node"},
    ]
    assert (cluster.nodes[1].state, cluster.nodes[1].ended_s) == ("failed", 5.0)
    assert [(p.index, p.state) for p in cluster.pods] == [
        (0, "failed"),
        (1, "ready"),
        (2, "failed"),
        (3, "starting"),  # replacement of pod 0: node 0's free GPU
        (4, "pending"),  # replacement of pod 2: a new node, Ready at 5 + 1 + 60 = 66 s
    ]
    assert cluster.pods[3].node is cluster.nodes[0] and cluster.nodes[2].state == "provisioning"
    env.run(until=70.0)
    assert (cluster.pods[4].bound_s, cluster.pods[4].node) == (66.0, cluster.nodes[2])


def test_an_injected_fault_waits_its_time_from_when_it_is_injected() -> None:
    spec = cluster_spec(node_pools=[{**GPU_POOL, "gpus_per_node": 2}], pod=FAST_POD, replicas=2)
    env, cluster = cluster_sim(spec)
    env.run(until=3.0)
    env.process(cluster.faults.inject(Fault(at_s=2.0, kind="pod", index=1)))
    env.run(until=10.0)
    assert (cluster.pods[1].state, cluster.pods[1].ended_s) == ("failed", 5.0)
    assert cluster.faults.log == [{"time_s": 2.0, "kind": "pod", "index": 1, "pods": [1]}]  # at_s as given
