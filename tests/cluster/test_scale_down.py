"""The scale-down order: Kubernetes' ReplicaSet ranking (ActivePodsWithRanks.Less) rule by rule, and a
pod-deletion-cost controller, on pods built by hand with known times, nodes and loads."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.cluster.factories import GPU_POOL
from ttftsim.cluster.placement import Node
from ttftsim.cluster.pod import Pod
from ttftsim.cluster.scale_down import log2_rank, make_ranking, pseudo_uid
from ttftsim.config.cluster_autoscaling import Autoscaling, DeletionCostScaleDown, ReplicaSetScaleDown
from ttftsim.config.cluster_nodes import NodePool

POOL = NodePool.model_validate({**GPU_POOL, "gpus_per_node": 8})
NODE_A, NODE_B = Node(0, POOL, 8), Node(1, POOL, 8)
REPLICASET = make_ranking(ReplicaSetScaleDown())


def pod(index: int, state: str = "ready", node: Node | None = NODE_A, ready_s: float = 0.0, **fields: object) -> Pod:
    made = Pod(index, "serving", created_s=0.0, state=state, node=node, ready_s=ready_s)
    made.phases = [("image_pull", 0.0, 0.0)] if node is not None else []
    for name, value in fields.items():
        setattr(made, name, value)
    return made


def indices(pods: list[Pod]) -> list[int]:
    return [p.index for p in pods]


def test_log2_rank_is_the_floor_of_log2_of_nanoseconds() -> None:
    assert log2_rank(1.0) == 29  # 1e9 ns: 2**29 = 536,870,912 <= 1e9 < 2**30
    assert log2_rank(100.0) == 36  # 1e11 ns: 2**36 = 6.87e10 <= 1e11 < 2**37 = 1.37e11
    assert log2_rank(0.0) == -1 and log2_rank(-5.0) == -1


def test_unassigned_then_pending_phase_then_not_ready_then_ready() -> None:
    ready = pod(0)
    running_not_ready = pod(1, "starting")  # its image is pulled: phase Running
    pulling = pod(2, "starting")
    pulling.phases = []  # still pulling: phase Pending
    unassigned = pod(3, "pending", node=None)
    order = REPLICASET.order([ready, running_not_ready, pulling, unassigned], now_s=100.0)
    assert indices(order) == [3, 2, 1, 0]


def test_a_crash_looping_pod_goes_before_a_starting_one_it_is_otherwise_level_with() -> None:
    assert indices(REPLICASET.order([pod(0, "starting"), pod(1, "crashloop")], now_s=50.0)) == [1, 0]


def test_doubled_up_pods_go_before_the_most_recently_ready() -> None:
    # pods 0 and 1 share node A; pod 2 is alone on B and became ready last: a doubled-up pod still goes first
    pods = [pod(0, ready_s=10.0), pod(1, ready_s=20.0), pod(2, node=NODE_B, ready_s=90.0)]
    order = REPLICASET.order(pods, now_s=100.0)
    # both 80 and 90 s ago are in bucket 36 (6.9e10 <= ns < 1.4e11): the UID decides, not the ready time
    assert log2_rank(80.0) == log2_rank(90.0) == 36
    expected_first = 0 if pseudo_uid(0) < pseudo_uid(1) else 1
    assert indices(order) == [expected_first, 1 - expected_first, 2]


def test_ready_times_in_different_log2_buckets_remove_the_younger_pod() -> None:
    pods = [pod(0, node=NODE_A, ready_s=0.0), pod(1, node=NODE_B, ready_s=95.0)]  # 100 s (36) and 5 s (32)
    assert indices(REPLICASET.order(pods, now_s=100.0)) == [1, 0]


def test_without_logarithmic_scale_down_the_later_ready_time_decides_within_a_bucket() -> None:
    pods = [pod(4, node=NODE_A, ready_s=10.0), pod(1, node=NODE_B, ready_s=20.0)]  # both in bucket 36
    linear = make_ranking(ReplicaSetScaleDown(logarithmic=False))
    assert indices(linear.order(pods, now_s=100.0)) == [1, 4]
    assert pseudo_uid(4) < pseudo_uid(1)  # so the logarithmic order differs: the UID puts pod 4 first
    assert indices(REPLICASET.order(pods, now_s=100.0)) == [4, 1]


def test_ready_times_compare_in_whole_seconds_as_kubernetes_stores_them() -> None:
    pods = [pod(4, node=NODE_A, ready_s=10.2), pod(1, node=NODE_B, ready_s=10.7)]  # both 10 s: equal
    linear = make_ranking(ReplicaSetScaleDown(logarithmic=False))
    assert indices(linear.order(pods, now_s=100.0)) == [4, 1]  # equal times and creation: the UID


def test_a_deletion_cost_controller_removes_the_least_busy_ready_pod_first() -> None:
    pods = [
        pod(0, ready_s=10.0, outstanding=3),
        pod(1, ready_s=90.0, outstanding=7),
        pod(2, node=NODE_B, outstanding=1),
    ]
    ranking = make_ranking(DeletionCostScaleDown(type="deletion_cost"))
    assert indices(ranking.order(pods, now_s=100.0)) == [2, 0, 1]  # the cost comes before the node rank
    assert indices(REPLICASET.order(pods, now_s=100.0))[0] == 1  # without it: doubled up on A, ready last


def test_the_ranking_section_defaults_to_the_replicaset_and_names_an_unknown_type() -> None:
    base = {"max_replicas": 4, "metrics": [{"name": "num_requests_waiting", "target": 5}]}
    assert Autoscaling.model_validate(base).scale_down_ranking == ReplicaSetScaleDown()
    assert Autoscaling.model_validate({**base, "scale_down_ranking": {"logarithmic": False}}).scale_down_ranking == (
        ReplicaSetScaleDown(logarithmic=False)
    )
    with pytest.raises(ValidationError, match="scale_down_ranking"):
        Autoscaling.model_validate({**base, "scale_down_ranking": {"type": "oldest"}})
