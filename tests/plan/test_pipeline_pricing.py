"""A plan whose engine runs pipeline stages prices and places replicas of TP x PP GPUs."""

from __future__ import annotations

from pathlib import Path

import yaml

from ttftsim.config.plan import Plan
from ttftsim.plan import evaluate
from ttftsim.plan.evaluate import Candidate

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "plans" / "quickstart.yaml"


def test_a_replica_of_two_stages_costs_twice_its_tensor_parallel_gpus() -> None:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["engine"]["pipeline_parallel_size"] = 2
    plan = Plan.model_validate(data)
    cand = Candidate("H100-SXM5-80GB", 2, None, None, True, True, None, "auto", "round_robin", 0)
    size = evaluate.sizing(plan, cand, max_rate=5.0)  # 20 req/s at 90 %: 5 replicas of TP2 x PP2
    assert (size["replicas"], size["gpus"], size["cost_per_hour"]) == (5, 20, 20 * 3.0)
    cluster = evaluate.cluster_scenario(plan, cand, 5).cluster
    assert cluster is not None and cluster.node_pools[0].max_nodes == 3  # 20 GPUs on 8-GPU nodes
