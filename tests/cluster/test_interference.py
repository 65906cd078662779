"""Co-location slowdowns by hand: busy pods on the same GPU and elsewhere on the node."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.cluster.factories import COST
from ttftsim.cluster.interference import SharedCost, shared_costs, slowdown
from ttftsim.cluster.placement import Node
from ttftsim.cluster.pod import Pod
from ttftsim.config.cluster import Interference
from ttftsim.config.cluster_nodes import NodePool
from ttftsim.perf.batch import BatchShape


def crowded_node() -> list[Pod]:
    """Pods 0 and 1 share GPU 0, pods 2 and 3 GPU 1; pods 1 and 2 are busy, pod 3 idle, pod 4 unbound."""
    node = Node(0, NodePool(name="gpu", hardware="H100-SXM5-80GB"), 2, state="ready")
    node.pods, node.gpu_of = [0, 1, 2, 3], {0: 0, 1: 0, 2: 1, 3: 1}
    engines: list[Any] = [SimpleNamespace(num_running=n) for n in (0, 2, 1, 0)]  # running requests
    pods = [Pod(i, "serving", 0.0, state="ready", node=node, engine=engine) for i, engine in enumerate(engines)]
    return [*pods, Pod(4, "serving", 0.0)]


@pytest.mark.parametrize(
    ("sharing", "overlap", "penalty", "factor"),
    [
        ("time_slicing", 0.5, 0.1, 1 + 1 + 0.1),  # pod 1 on its GPU, pod 2 elsewhere on the node
        ("mps", 0.4, 0.1, 1 + 0.4 + 0.1),
        ("time_slicing", 0.5, 0.0, 2.0),
    ],
)
def test_slowdown_counts_busy_pods_on_the_gpu_and_on_the_node(
    sharing: str, overlap: float, penalty: float, factor: float
) -> None:
    pods = crowded_node()
    spec = Interference.model_validate(
        {"pods_per_gpu": 2, "sharing": sharing, "mps_overlap": overlap, "node_penalty": penalty}
    )
    assert slowdown(pods[0], pods, spec) == pytest.approx(factor)
    assert slowdown(pods[3], pods, spec) == pytest.approx(1 + 1 * (overlap if sharing == "mps" else 1) + penalty)
    assert slowdown(pods[4], pods, spec) == 1.0  # on no node


def test_costs_are_wrapped_only_when_co_location_costs_something() -> None:
    pods = crowded_node()
    assert shared_costs(pods[0], pods, Interference()) is None  # one pod per GPU, no node penalty
    wrap = shared_costs(pods[0], pods, Interference(node_penalty=0.5))
    assert wrap is not None
    prefill = BatchShape(num_prefill_seqs=1, prefill_tokens=100, prefill_kv_tokens=100, num_sampled=1)
    # pod 0 now: busy pod 1 on its GPU and pod 2 on the node; no time-slicing (1 pod per GPU counts the
    # GPU neighbour too): 1 + 1 + 0.5 x 1 = 2.5 times the solo 0.026 s
    assert wrap(COST).time_s(prefill) == pytest.approx(0.026 * 2.5)


def test_a_shared_cost_reads_the_factor_each_iteration_and_once_per_decode_run() -> None:
    factors = iter([2.0, 3.0, 1.5, 4.0])
    cost = SharedCost(COST, lambda: next(factors))
    prefill = BatchShape(num_prefill_seqs=1, prefill_tokens=100, prefill_kv_tokens=100, num_sampled=1)
    assert [cost.time_s(prefill), cost.time_s(prefill)] == pytest.approx([0.026 * 2, 0.026 * 3])
    step = cost.decode_step_s(1)  # the factor when the run starts (1.5) holds for all its steps
    assert [step(100), step(200)] == pytest.approx([(0.0052 + 100e-5) * 1.5, (0.0052 + 200e-5) * 1.5])
    run = cost.decode_run_s(1, 100, 2)  # one seq, 100 KV tokens, 2 steps at factor 4
    assert list(run) == pytest.approx([(0.0052 + 100e-5) * 4, (0.0052 + 101e-5) * 4])
