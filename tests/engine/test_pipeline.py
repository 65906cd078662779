"""Pipeline parallelism's batch queue, by hand: PP batches in flight, a prefill's chunks pipelined through
the stages, a decode waiting for its token before its next step (engine/pipeline.py)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.factories import make_engine, request
from ttftsim.engine.pipeline import StageClock
from ttftsim.perf.batch import BatchShape

STAGE_FIXED_S, STAGE_PER_TOKEN_S, SEND_S = 0.001, 1e-5, 0.0005


class TwoStages:
    """Two stages of 0.001 s + 10 us per token each, 0.5 ms to send between them."""

    def stage_times(self, shape: BatchShape, hidden_host: bool) -> list[float]:
        return [STAGE_FIXED_S + STAGE_PER_TOKEN_S * shape.num_tokens] * 2

    def transfer_times(self, shape: BatchShape) -> list[float]:
        return [SEND_S]

    def time_s(self, shape: BatchShape) -> float:
        return sum(self.stage_times(shape, False)) + SEND_S

    def idle_start_s(self, shape: BatchShape) -> float:
        return self.time_s(shape)

    def decode_step_s(self, num_seqs: int) -> object:
        raise AssertionError("no closed-form decode runs with pipeline parallelism")

    def decode_run_s(self, num_seqs: int, kv_tokens: int, steps: int) -> NDArray[np.float64]:
        raise AssertionError("no closed-form decode runs with pipeline parallelism")


def test_the_stage_clock_is_a_flow_shop() -> None:
    clock = StageClock(2)
    assert clock.run(0.0, [2.0, 3.0], [1.0]) == (0.0, 6.0)  # stage 0: 0-2, send 2-3, stage 1: 3-6
    assert clock.run(0.0, [2.0, 3.0], [1.0]) == (2.0, 9.0)  # stage 0: 2-4, stage 1 busy until 6: 6-9
    assert clock.run(10.0, [1.0, 1.0], [1.0]) == (10.0, 13.0)  # both free again


def test_a_long_prompt_pipelines_its_chunks_and_a_decode_waits_for_its_token() -> None:
    env, engine, recorder = make_engine(
        cost=TwoStages(), pipeline_parallel_size=2, max_num_batched_tokens=1000, max_num_seqs=8
    )
    engine.submit(request(0, 0.0, 2500, 2))
    env.run(until=1.0)
    # chunk 1 (1000 tokens, 11 ms a stage): stage 0 0-11 ms, stage 1 11.5-22.5 ms; chunk 2 is scheduled at
    # once (the queue holds two batches): stage 0 11-22, stage 1 22.5-33.5; chunk 3 (500 tokens, 6 ms) waits
    # for a free slot (batch 1 back at 22.5): stage 0 22.5-28.5, stage 1 33.5-39.5: the first token at 39.5 ms
    # (one batch at a time would take 22.5 + 22.5 + 12.5 = 57.5 ms). The second token: a 1-token batch
    # scheduled only when the first is back: 39.5 + 1.01 + 0.5 + 1.01 = 42.02 ms.
    row = recorder.requests_frame().iloc[0]
    assert row["first_token_s"] == pytest.approx(0.0395, abs=1e-12)
    assert row["finish_s"] == pytest.approx(0.04202, abs=1e-12)
    steps = recorder.steps_frame()
    assert list(steps["num_tokens"]) == [1000, 1000, 500, 1]
    assert list(steps["time_s"]) == pytest.approx([0.0, 0.011, 0.0225, 0.0395], abs=1e-12)


def test_a_request_arriving_while_the_engine_waits_on_a_batch_joins_the_next_one() -> None:
    env, engine, recorder = make_engine(cost=TwoStages(), pipeline_parallel_size=2, max_num_seqs=8)
    engine.submit(request(0, 0.0, 100, 3))  # batch: stages 2 ms each, back at 4.5 ms
    env.run(until=0.001)
    engine.submit(request(1, 0.001, 100, 1))  # the engine blocks on batch 1: it sees this at 4.5 ms
    env.run(until=1.0)
    rows = recorder.requests_frame().set_index("request_id")
    assert rows.loc[0, "first_token_s"] == pytest.approx(0.0045, abs=1e-12)
    # at 4.5 ms one batch: request 0's decode (1 token) and request 1's prompt (100): 2.01 ms a stage
    assert rows.loc[1, "first_token_s"] == pytest.approx(0.0045 + 2 * 0.00201 + SEND_S, abs=1e-12)
    assert list(recorder.steps_frame()["num_tokens"]) == [100, 101, 1]


def test_a_verify_batch_in_flight_leaves_nothing_to_schedule_for_its_request() -> None:
    """With drafts, a request with one token left has 1 + k in flight after its verify batch goes out: the
    next schedule gives it nothing (vLLM: no new tokens), not -k tokens (a negative step that crashed the
    calibrated attention cost with a log of a negative count)."""
    spec = {"method": "ngram", "num_speculative_tokens": 1, "acceptance_rate": 0.6}
    env, engine, recorder = make_engine(cost=TwoStages(), pipeline_parallel_size=2, speculative_config=spec)
    engine.submit(request(0, 0.0, 100, 10))
    env.run(until=1.0)
    assert (recorder.steps_frame()["num_tokens"] > 0).all()
    row = recorder.requests_frame().iloc[0]
    assert row["status"] == "finished" and row["generated_tokens"] == 10
