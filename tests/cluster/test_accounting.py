"""The books on hand-built nodes and pods: the bill from each node's request to its end, the time series
every window, the pod rows with their phase durations."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import simpy

from ttftsim.cluster.accounting import Accounting
from ttftsim.cluster.placement import Node
from ttftsim.cluster.pod import Pod
from ttftsim.config.cluster_nodes import NodePool


def pool(name: str, gpus: int, price: float) -> NodePool:
    return NodePool(name=name, hardware="H100-SXM5-80GB", gpus_per_node=gpus, price_per_node_hour_usd=price)


def books(nodes: list[Node], pods: list[Pod], held: int = 0) -> tuple[simpy.Environment, Accounting]:
    env = simpy.Environment()
    provisioner = SimpleNamespace(nodes=nodes)
    lifecycle = SimpleNamespace(pods=pods, desired=3)
    gateway = SimpleNamespace(num_held=held)
    return env, Accounting(env, 10.0, provisioner, lifecycle, gateway)  # type: ignore[arg-type]


def test_each_node_is_billed_from_its_request_to_its_end_or_the_horizon() -> None:
    removed = Node(0, pool("a", 8, 40.0), 8, state="removed", requested_s=0.0, ended_s=1800.0)
    running = Node(1, pool("b", 2, 10.0), 2, state="ready", requested_s=900.0)
    env, acc = books([removed, running], [])
    env.run(until=3600.0)
    # a: 0.5 h x $40 = $20 (8 GPUs: 4 GPU-hours); b: 0.75 h x $10 = $7.50 (2 GPUs: 1.5 GPU-hours)
    assert acc.cost() == pytest.approx({"node_hours": 1.25, "gpu_hours": 5.5, "cost_usd": 27.5})


def test_the_series_counts_serving_pods_by_state_warm_pods_nodes_and_the_queue_every_window() -> None:
    gpu = pool("a", 2, 1.0)
    nodes = [Node(0, gpu, 2, state="ready"), Node(1, gpu, 2)]  # the second provisioning
    pods = [
        Pod(0, "serving", 0.0, state="ready", outstanding=4),
        Pod(1, "serving", 0.0, state="starting"),
        Pod(2, "warm", 0.0, state="ready"),
        Pod(3, "prefill", 0.0, state="ready", outstanding=1),
        Pod(4, "serving", 0.0, state="pending"),
    ]
    env, acc = books(nodes, pods, held=2)
    env.process(acc.run())
    env.run(until=5.0)
    pods[1].state = "ready"
    env.run(until=15.0)
    first = {
        "time_s": 0.0,
        "desired_replicas": 3.0,
        "pods_pending": 1.0,
        "pods_starting": 1.0,
        "pods_ready": 1.0,  # serving pods only: not the warm one or the prefill pod
        "pods_draining": 0.0,
        "pods_crashloop": 0.0,
        "pods_warm": 1.0,
        "nodes_ready": 1.0,
        "nodes_provisioning": 1.0,
        "gateway_queue": 2.0,
        "outstanding": 5.0,  # every pod's, the prefill pod's included
    }
    assert acc.series == [first, {**first, "time_s": 10.0, "pods_starting": 0.0, "pods_ready": 2.0}]


def test_a_pod_row_has_its_nodes_times_and_each_phase_duration() -> None:
    gpu = pool("a", 8, 1.0)
    leader, worker = Node(3, gpu, 8, state="ready"), Node(4, gpu, 8, state="ready")
    pod = Pod(0, "serving", 2.0, state="ready", node=leader, workers=[worker], bound_s=5.0, ready_s=40.0)
    pod.phases = [("pending", 2.0, 5.0), ("image_pull", 5.0, 15.0), ("container_start", 15.0, 30.0)]
    _, acc = books([leader, worker], [pod, Pod(1, "serving", 3.0)])
    acc.close()
    assert acc.pod_rows[0] == {
        "pod": 0,
        "role": "serving",
        "node": 3,
        "nodes": 2,
        "state": "ready",
        "created_s": 2.0,
        "bound_s": 5.0,
        "ready_s": 40.0,
        "ended_s": pytest.approx(float("nan"), nan_ok=True),
        "end_reason": "",
        "pending_s": 3.0,
        "image_pull_s": 10.0,
        "container_start_s": 15.0,
    }
    assert (acc.pod_rows[1]["node"], acc.pod_rows[1]["nodes"]) == (-1, 0)  # never bound
