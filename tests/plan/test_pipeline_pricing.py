"""A plan whose engine runs pipeline stages prices and places replicas of TP x PP GPUs."""

from __future__ import annotations

from pathlib import Path

import yaml

from ttftsim.config.plan import Plan
from ttftsim.plan import evaluate
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.ranking import Row
from ttftsim.plan.search import candidates

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


def test_a_candidate_of_two_stages_says_so_in_its_label_and_sentence() -> None:
    """Every candidate of a plan whose engine runs 2 pipeline stages is labelled TP x PP: '2 x L40S-48GB TP1' with
    4 GPUs read as two single-GPU replicas (cold trial D9). A plan of one stage labels, keys and writes its
    candidates as before (no PP1, no pipeline_parallel_size in plan.json or the checkpoint's keys)."""
    data = yaml.safe_load(QUICKSTART.read_text())
    data["search"].update(hardware=["H100-SXM5-80GB"], tensor_parallel_size=[1], max_num_seqs=[None])
    one_stage = candidates(Plan.model_validate(data))
    data["engine"]["pipeline_parallel_size"] = 2
    plan = Plan.model_validate(data)
    (cand,) = candidates(plan)
    assert cand.label() == "H100-SXM5-80GB TP1 PP2, least_outstanding"
    row = Row(cand, "estimate", replicas=2, cost_per_hour=12.0)
    assert row.head() == "2 x H100-SXM5-80GB TP1 PP2, least_outstanding ($12.00/h)"
    assert cand.as_dict()["pipeline_parallel_size"] == 2 and '"pipeline_parallel_size": 2' in cand.key
    (single,) = one_stage
    assert single.label() == "H100-SXM5-80GB TP1, least_outstanding"
    assert "pipeline_parallel_size" not in single.as_dict() and "pipeline" not in single.key
