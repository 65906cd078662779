"""Speculative decoding by hand: a verify step of k+1 tokens per decoding sequence, the accepted drafts and
one more token emitted together, the budget counting drafts, the proposer's memory (docs/engine-semantics.md 11)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from tests.factories import make_engine, request
from ttftsim.config.engine import EngineArgs, SpeculativeConfig
from ttftsim.config.resolved_engine import resolve_engine
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.linear import LinearStepModel
from ttftsim.perf.memory import proposer_bytes

COST = LinearStepModel(0.01, 0.001)  # 10 ms a step + 1 ms per computed token
ALWAYS = {"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.999999}  # every draft accepted


def test_every_verify_step_emits_k_plus_one_tokens_when_every_draft_is_accepted() -> None:
    env, engine, recorder = make_engine(cost=COST, speculative_config=ALWAYS)
    engine.submit(request(0, 0.0, 100, 10))
    env.run(until=10.0)
    row = recorder.requests_frame().iloc[0]
    # prefill 10 + 100 ms; then verify steps of 4 tokens (its token + 3 drafts): 14 ms each, 4 tokens each:
    # 9 tokens left -> 4, 4, then 1 (the step verifies 4, only 1 is wanted)
    assert row["first_token_s"] == pytest.approx(0.110, abs=1e-12)
    assert row["finish_s"] == pytest.approx(0.110 + 3 * 0.014, abs=1e-12)
    assert list(recorder.steps_frame()["num_tokens"]) == [100, 4, 4, 4]
    assert row["generated_tokens"] == 10


def test_the_mean_tokens_per_step_follow_the_acceptance_rate() -> None:
    spec = {"method": "ngram", "num_speculative_tokens": 3, "acceptance_rate": 0.5}
    env, engine, recorder = make_engine(cost=COST, speculative_config=spec, max_num_seqs=64)
    for rid in range(40):
        engine.submit(request(rid, 0.0, 16, 200))
    env.run(until=1000.0)
    _, weights = recorder.itl_samples()  # one inter-token gap per request and verify step
    verify_steps = weights.sum()
    tokens = 40 * 199  # every token after the first came from a verify step
    expected = (1 - 0.5**4) / (1 - 0.5)  # 1.875 tokens per sequence and step
    assert tokens / verify_steps == pytest.approx(expected, rel=0.03)


def test_drafts_count_against_the_token_budget() -> None:
    env, engine, recorder = make_engine(cost=COST, speculative_config=ALWAYS, max_num_batched_tokens=10)
    for rid in range(3):
        engine.submit(request(rid, 0.0, 3, 50))
    env.run(until=0.02)  # step 1: the three prompts (9 tokens)
    env.run(until=10.0)
    # then three decoding sequences ask 4 tokens each: 4 + 4 + 2 (the third's drafts cut to the budget)
    assert list(recorder.steps_frame()["num_tokens"])[:2] == [9, 10]


def test_eagle_adds_one_decoder_layer_of_weights_and_kv_per_gpu() -> None:
    h100, llama = load_hardware("H100-SXM5-80GB"), load_model("Llama-3.1-8B")
    layer = 2 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096)  # bf16 bytes of one block
    eagle = Deployment(llama, h100, tp=2, spec_method="eagle3", spec_tokens=3)
    assert proposer_bytes(eagle) == (math.ceil(layer / 2), 2 * 1 * 4 * 128 * 2)  # 4 of 8 KV heads per GPU
    assert proposer_bytes(Deployment(llama, h100, tp=2, spec_method="ngram", spec_tokens=3)) == (0, 0)


def test_a_verify_step_costs_logits_at_every_position_and_the_drafting_passes() -> None:
    h100, llama = load_hardware("H100-SXM5-80GB"), load_model("Llama-3.1-8B")
    plain = IterationModel(Deployment(llama, h100))
    eagle = IterationModel(Deployment(llama, h100, spec_method="eagle3", spec_tokens=3))
    verify = BatchShape.from_sequences([4], [1000])  # one sequence: its token and 3 drafts
    verify = BatchShape(
        verify.num_prefill_seqs, 4, verify.prefill_attn_pairs, verify.prefill_kv_tokens, 0, 0, 1, num_spec_tokens=3
    )
    assert eagle.timing(verify).breakdown["proposer"] == pytest.approx(eagle.proposer_s(verify))
    assert eagle.proposer_s(verify) > 0
    assert (
        eagle.timing(verify).breakdown["lm_head"]
        > plain.timing(BatchShape.from_sequences([1], [1000])).breakdown["lm_head"]
    )


def test_inconsistent_speculative_configs_name_the_field() -> None:
    with pytest.raises(ValidationError, match="acceptance_rate is required for method ngram"):
        SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    with pytest.raises(ValidationError, match="model names the draft model"):
        SpeculativeConfig(method="eagle3", num_speculative_tokens=3, model="Llama-3.2-1B")
    assert SpeculativeConfig(method="eagle3", num_speculative_tokens=3).acceptance == 0.74
    args = EngineArgs(speculative_config=ALWAYS, async_scheduling=True)
    with pytest.raises(ValueError, match="async_scheduling is not supported with speculative method ngram"):
        resolve_engine(args, load_hardware("H100-SXM5-80GB"), 131072, "bf16")
    eagle = EngineArgs(speculative_config={"method": "eagle3", "num_speculative_tokens": 2})
    assert resolve_engine(eagle, load_hardware("H100-SXM5-80GB"), 131072, "bf16").async_scheduling  # EAGLE keeps it
