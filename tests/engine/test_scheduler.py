"""vLLM V1 scheduling semantics on tiny, hand-checked cases."""

from __future__ import annotations

import pytest

from tests.factories import feed, make_engine, request
from ttftsim.engine.recorder import Recorder
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.linear import LinearStepModel


def _rows(recorder: Recorder) -> dict[int, dict[str, float]]:
    frame = recorder.requests_frame()
    return {int(row["request_id"]): row for row in frame.to_dict("records")}


def test_single_request_ttft_is_its_prefill_iteration_time() -> None:
    perf = IterationModel(Deployment(load_model("Llama-3.1-8B"), load_hardware("H100-SXM5-80GB")))
    env, engine, recorder = make_engine(cost=perf)
    feed(env, engine, [request(0, 0.5, 1000, 4)])
    env.run()
    row = _rows(recorder)[0]
    assert row["ttft_s"] == pytest.approx(perf.time_s(BatchShape.from_sequences([1000], [0])), rel=1e-12)
    assert row["queue_s"] == 0.0 and row["prefill_s"] == pytest.approx(row["ttft_s"])
    decode = [perf.time_s(BatchShape.from_sequences([1], [1000 + i])) for i in range(3)]
    assert row["e2e_s"] == pytest.approx(row["ttft_s"] + sum(decode), rel=1e-12)


def test_chunked_prefill_splits_a_long_prompt_across_budget_sized_iterations() -> None:
    cost = LinearStepModel(0.01, 0.001)
    env, engine, recorder = make_engine(cost=cost, max_num_batched_tokens=2048)
    feed(env, engine, [request(0, 0.0, 5000, 2)])
    env.run()
    # chunks of 2048, 2048, 904 tokens
    assert _rows(recorder)[0]["ttft_s"] == pytest.approx(3 * 0.01 + 5000 * 0.001)


def test_decodes_are_served_before_new_prompts_and_chunk_fills_the_rest() -> None:
    cost = LinearStepModel(0.01, 0.001)
    env, engine, recorder = make_engine(cost=cost, max_num_batched_tokens=100)
    feed(env, engine, [request(0, 0.0, 50, 10), request(1, 0.001, 200, 1)])
    env.run()
    steps = recorder.steps_frame()
    # step 1: req 0 prefill (50); step 2: req 0 decode (1) + 99 tokens of req 1; then 1 + 99, then 1 + 2
    assert list(steps["num_tokens"][:4]) == [50, 100, 100, 3]
    assert _rows(recorder)[1]["first_token_s"] == pytest.approx(steps["time_s"][3] + steps["duration_s"][3])


def test_chunked_prefill_off_waits_for_a_whole_prompt_budget() -> None:
    cost = LinearStepModel(0.01, 0.001)
    env, engine, recorder = make_engine(
        cost=cost, enable_chunked_prefill=False, max_num_batched_tokens=4096, max_model_len=4096
    )
    feed(env, engine, [request(0, 0.0, 3000, 3), request(1, 0.0, 3000, 3)])
    env.run()
    steps = recorder.steps_frame()
    assert steps["num_tokens"].iloc[0] == 3000  # the second prompt does not fit the remaining 1096 tokens
    assert steps["num_tokens"].iloc[1] == 3001


def test_preemption_takes_the_last_running_request_and_blocks_admission() -> None:
    # 8 blocks of 16 tokens, 10 ms per step. Step 1 (t = 0): all three prompts, 3 + 3 + 1 blocks, 1 left.
    # Step 2 (0.01): request 0's 49th token takes the last block; request 1's needs one more: the last running
    # request (2) is preempted and its block goes to request 1. Steps 2-17: 0 and 1 decode (positions 48-63).
    # Step 18 (0.17): request 0 needs its 5th block: the last running (1) is preempted (4 blocks back, 1 taken).
    # Request 1 then heads the waiting queue needing 5 blocks for its 65 tokens with 3 free: FCFS admits nobody
    # behind it, not even request 2 (1 block), until request 0 ends at 0.40 (prefill + 39 decodes).
    # Both then recompute in one step (0.40 .. 0.41): request 2 is done; request 1 decodes 22 more: 0.63.
    env, engine, recorder = make_engine(num_blocks=8, cost=LinearStepModel(0.01), closed_form=False)
    feed(env, engine, [request(0, 0.0, 48, 40), request(1, 0.0, 48, 40), request(2, 0.0, 10, 2)])
    env.run()
    rows = _rows(recorder)
    assert [rows[i]["num_preemptions"] for i in range(3)] == [0, 1, 1]
    assert [rows[i]["e2e_s"] for i in range(3)] == pytest.approx([0.40, 0.63, 0.41])
    assert all(row["status"] == "finished" for row in rows.values())
    assert engine.kv.pool.num_free == 8


def test_max_model_len_rejects_with_reason() -> None:
    env, engine, recorder = make_engine(max_model_len=1024)
    feed(env, engine, [request(0, 0.0, 1000, 100), request(1, 0.0, 100, 10)])
    env.run()
    rows = _rows(recorder)
    assert rows[0]["status"] == "rejected"
    assert "exceed max_model_len 1024" in rows[0]["reason"]
    assert rows[1]["status"] == "finished"


def test_prefix_cache_hit_reuses_full_blocks_but_recomputes_the_last_block() -> None:
    env, engine, recorder = make_engine()
    feed(env, engine, [request(0, 0.0, 64, 2, content=7), request(1, 1.0, 64, 2, content=7)])
    env.run()
    rows = _rows(recorder)
    assert rows[0]["cached_tokens"] == 0
    assert rows[1]["cached_tokens"] == 48  # (64 - 1) // 16 full blocks
    assert engine.kv.hit_tokens == 48 and engine.kv.query_tokens == 128


def test_priority_policy_admits_lower_priority_values_first() -> None:
    env, engine, recorder = make_engine(scheduling_policy="priority", max_num_seqs=1, cost=LinearStepModel(0.01))
    feed(
        env,
        engine,
        [
            request(0, 0.0, 10, 2, priority=5),
            request(1, 0.001, 10, 2, priority=9),
            request(2, 0.002, 10, 2, priority=1),
        ],
    )
    env.run()
    rows = _rows(recorder)
    # one sequence at a time, 10 ms per step: request 0 runs 0 .. 0.02 (prefill, one decode); at 0.02 request 2
    # (priority 1) goes before request 1 (priority 9): first tokens at 0.03 and 0.05
    assert [rows[i]["first_token_s"] for i in range(3)] == pytest.approx([0.01, 0.05, 0.03])


def test_static_preallocation_limits_concurrency_to_max_model_len_reservations() -> None:
    env, engine, recorder = make_engine(
        num_blocks=64, kv_cache_mode="static", max_model_len=256, cost=LinearStepModel(0.01)
    )
    feed(env, engine, [request(i, 0.0, 32, 20) for i in range(8)])
    env.run()
    assert recorder.steps_frame()["running"].max() == 4  # 64 blocks / 16 per reservation


def test_no_kv_cache_recomputes_the_whole_context_every_step() -> None:
    cost = LinearStepModel(0.0, 0.001)
    env, engine, recorder = make_engine(kv_cache_mode="none", cost=cost)
    feed(env, engine, [request(0, 0.0, 100, 3)])
    env.run()
    assert list(recorder.steps_frame()["num_tokens"]) == [100, 101, 102]


def test_first_visible_token_delays_client_ttft_by_whole_iterations() -> None:
    cost = LinearStepModel(0.01, 0.001)
    env, engine, recorder = make_engine(cost=cost, first_visible_token=3)
    feed(env, engine, [request(0, 0.0, 100, 5), request(1, 0.0, 100, 2)])
    env.run()
    rows = _rows(recorder)
    prefill = 0.01 + 0.001 * 200  # both prompts in one iteration
    both, alone = 0.01 + 0.001 * 2, 0.01 + 0.001  # decode steps with 2, then 1 sequence (request 1 ends)
    assert rows[0]["ttft_s"] == pytest.approx(prefill + both + alone)  # third token, two decode steps later
    assert rows[0]["stream_s"] == pytest.approx(both + alone)
    assert rows[1]["ttft_s"] == pytest.approx(prefill + both)  # only 2 tokens: the client sees the end
