"""`ttftsim plan` searching an MoE model's parallelism: TP x DP x EP candidates, their GPUs, labels, checkpoint
keys and vLLM flags, the limits the plan refuses, and the example plan end to end (docs/engine-semantics.md 16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.test_cli import run
from ttftsim.config.plan import Plan
from ttftsim.plan import evaluate
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.k8s.spec import vllm_args
from ttftsim.plan.run import load_plan
from ttftsim.plan.search import candidates

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "plans" / "moe-parallelism.yaml"
PLANS = ROOT / "tests" / "data" / "plans"  # example plans as they were written before later fields


def test_the_search_is_the_product_of_tp_dp_and_ep() -> None:
    plan = load_plan(EXAMPLE)
    found = candidates(plan)
    assert len(found) == 3 * 2 * 2 - 1  # EP on one GPU (TP 1 x DP 1) is the candidate without EP: vLLM turns it off
    grid = {(c.tensor_parallel_size, c.data_parallel_size, c.enable_expert_parallel) for c in found}
    everything = {(tp, dp, ep) for tp in (1, 2, 4) for dp in (1, 2) for ep in (False, True)}
    assert grid == everything - {(1, 1, True)}
    tp2_dp2_ep = next(
        c for c in found if (c.tensor_parallel_size, c.data_parallel_size) == (2, 2) and c.enable_expert_parallel
    )
    assert tp2_dp2_ep.label().startswith("H100-SXM5-80GB TP2 DP2 EP,")
    assert evaluate.replica_gpus(plan, tp2_dp2_ep) == 4
    args = vllm_args(plan, tp2_dp2_ep, "mistralai/Mixtral-8x7B-v0.1")
    assert args[3:5] == ["--tensor-parallel-size", "2"]
    assert args[5:7] == ["--data-parallel-size", "2"] and "--enable-expert-parallel" in args
    engine = evaluate.engine_args(plan, tp2_dp2_ep)
    assert (engine["data_parallel_size"], engine["enable_expert_parallel"]) == (2, True)


def test_a_plan_and_candidate_without_dp_or_ep_keep_their_checkpoint_identity() -> None:
    """Plans checkpointed before the parallelism fields existed resume: the plan's digest (these values were
    computed by the code before the fields, 8fa8f75, for the example plans as they were then: tests/data/plans)
    and its candidates' keys are unchanged."""
    assert evaluate.plan_digest(load_plan(PLANS / "quickstart-8fa8f75.yaml")) == "3276b337b678775b"
    assert evaluate.plan_digest(load_plan(PLANS / "chat-70b-tpot-8fa8f75.yaml")) == "5dad97bb56975ca9"
    assert evaluate.plan_digest(load_plan(EXAMPLE)) != evaluate.plan_digest(
        load_plan(EXAMPLE).model_copy(
            update={"search": load_plan(EXAMPLE).search.model_copy(update={"data_parallel_size": [1]})}
        )
    )
    cand = Candidate("H100-SXM5-80GB", 2, None, None, True, True, None, "auto", "round_robin", 0)
    assert json.loads(cand.key) == {
        "hardware": "H100-SXM5-80GB",
        "tensor_parallel_size": 2,
        "max_num_seqs": None,
        "max_num_batched_tokens": None,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,
        "quantization": None,
        "kv_cache_dtype": "auto",
        "router": "round_robin",
        "warm_pool": 0,
    }
    wider = Candidate("H100-SXM5-80GB", 2, None, None, True, True, None, "auto", "round_robin", 0, 2, True)
    assert json.loads(wider.key)["data_parallel_size"] == 2 and json.loads(wider.key)["enable_expert_parallel"]


def test_dp_beyond_one_node_is_infeasible_and_dp_in_the_plans_engine_is_refused(tmp_path: Path) -> None:
    plan = load_plan(EXAMPLE)
    wide = Candidate("H100-SXM5-80GB", 8, None, None, True, True, None, "auto", "round_robin", 0, 2, True)
    verdict = evaluate.bound(plan, str(EXAMPLE.parent), wide)
    assert verdict == {"feasible": False, "reason": "data-parallel engines beyond one node are not modelled"}
    spec = plan.model_dump()
    spec["engine"]["data_parallel_size"] = 2
    with pytest.raises(ValidationError, match=r"search sets it per candidate: give it as search.data_parallel_size"):
        Plan.model_validate(spec)
    spec = plan.model_dump()
    spec["engine"]["tensor_parallel_size"] = 2  # was ignored: the search tried its own list
    with pytest.raises(ValidationError, match=r"search sets it per candidate: give it as search.tensor_parallel_size"):
        Plan.model_validate(spec)


def test_the_example_plan_prices_dp_and_ep_candidates(tmp_path: Path) -> None:
    result = run("plan", str(EXAMPLE), "--out", str(tmp_path), "--json", "--workers", "2")
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    rows = report["ranked"]
    assert report["candidates"] == len(rows) == 11
    by_shape = {
        (
            row["candidate"]["tensor_parallel_size"],
            row["candidate"]["data_parallel_size"],
            row["candidate"]["enable_expert_parallel"],
        ): row
        for row in rows
    }
    # Mixtral's 93 GB of bf16 weights: TP 1 fits only with its experts whole (EP) or sliced over TP x DP = 2 GPUs
    assert by_shape[(1, 1, False)]["status"] == "infeasible"
    for ep in (False, True):
        assert by_shape[(1, 2, ep)]["status"] != "infeasible" and by_shape[(1, 2, ep)]["gpus"] % 2 == 0
    assert by_shape[(2, 2, True)]["gpus"] == 4 * by_shape[(2, 2, True)]["replicas"]
    winner = report["winner"]
    assert winner is not None and winner["status"] == "confirmed"
    # experts per GPU under EP (8 / (TP x DP)) below the MoE tables' range: said once, naming the candidates
    experts4 = [w for w in report["warnings"] if w.startswith("moe/bf16: experts=4 (experts) outside the calibrated")]
    assert len(experts4) == 1 and experts4[0].endswith(
        "(candidates: H100-SXM5-80GB TP1 DP2 EP, least_outstanding; H100-SXM5-80GB TP2 EP, least_outstanding)"
    )
    assert "warning:" not in result.stderr  # not printed by each worker process as it met them
    resumed = run("plan", str(EXAMPLE), "--out", str(tmp_path), "--json", "--workers", "1", "--resume")
    assert json.loads(resumed.stdout)["warnings"] == report["warnings"]  # stored with the tasks' results
