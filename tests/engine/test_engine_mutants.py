"""The engine and scheduler paths the mutation run of engine.py and scheduler.py (docs/testing.md) found no
test could tell apart, each worked out by hand: client timeouts (who is aborted, in which order, what is
freed, who runs next).

Costs are LinearStepModel(0.25): every iteration takes a quarter second, exact in binary, so times below are
exact. A client gives up client_timeout_s after sending; the engine aborts its request at the first
iteration boundary at or after that deadline.
"""

from __future__ import annotations

import pytest
import simpy

from tests.factories import engine_config, feed, request
from ttftsim.config.resolved_engine import ResolvedEngine
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import REQUEST_COLUMNS, Recorder
from ttftsim.engine.state import RequestState
from ttftsim.perf.linear import LinearStepModel
from ttftsim.workload.request import Request

STATUS, REASON = REQUEST_COLUMNS.index("status"), REQUEST_COLUMNS.index("reason")
SCHEDULED, FIRST, FINISH = (REQUEST_COLUMNS.index(c) for c in ("first_scheduled_s", "first_token_s", "finish_s"))


def _engine(max_num_seqs: int, budget: int = 8192, timeout: float = 1.0) -> tuple[simpy.Environment, Engine, Recorder]:
    env, recorder = simpy.Environment(), Recorder(0.0)
    cfg = engine_config(max_num_seqs=max_num_seqs, max_num_batched_tokens=budget, block_size=16)
    engine = Engine(env, cfg, LinearStepModel(0.25), 100, recorder, client_timeout_s=timeout)
    return env, engine, recorder


def _rows(recorder: Recorder) -> list[tuple[int, str, str, float, float, float]]:
    return [(r[0], r[STATUS], r[REASON], r[SCHEDULED], r[FIRST], r[FINISH]) for r in recorder.rows]


def _nan_as_none(rows: list[tuple[int, str, str, float, float, float]]) -> list[tuple[object, ...]]:
    return [tuple(None if isinstance(x, float) and x != x else x for x in row) for row in rows]


def test_timed_out_requests_end_running_first_then_waiting_in_queue_order_and_the_rest_keep_theirs() -> None:
    # one sequence at a time, every deadline 1 s after the send. t=0: request 0 runs, 1 waits. At 1.0 (the run
    # is cut there) both deadlines pass: 0 (running) then 1 (waiting) are aborted; 2 (sent 0.5) is admitted at
    # 1.0, its first token at 1.25, aborted at its deadline 1.5 while it decodes. 4 (sent 1.5) runs from 1.5
    # (tokens at 1.75 and 2.0: finished, 0.5 s), 5 (1.6) from 2.0 to 2.5 (0.9 s); 3 (sent 1.75) is admitted
    # at 2.5 and aborted at its deadline 2.75, after the step that gave its first token (TTFT 1.0 s, not above
    # the timeout: the client saw it), before its second.
    env, engine, recorder = _engine(max_num_seqs=1)
    requests: list[Request] = [
        request(0, 0.0, 16, 100),
        request(1, 0.0, 16, 5),
        request(2, 0.5, 16, 5),
        request(4, 1.5, 16, 2),
        request(5, 1.6, 16, 2),
        request(3, 1.75, 16, 2),
    ]
    feed(env, engine, requests)
    env.run(until=20)
    why = "client timeout after 1 s"
    assert _nan_as_none(_rows(recorder)) == [
        (0, "aborted", why, 0.0, 0.25, None),
        (1, "aborted", why, None, None, None),
        (2, "aborted", why, 1.0, 1.25, None),
        (4, "finished", "", 1.5, 1.75, 2.0),
        (5, "finished", "", 2.0, 2.25, 2.5),
        (3, "aborted", why, 2.5, 2.75, None),
    ]
    assert engine.kv.pool.num_free == 100 and engine.num_running == 0 and engine.num_waiting == 0


def test_a_request_timed_out_in_the_middle_of_its_chunked_prefill_frees_its_blocks() -> None:
    # 16 tokens a step: request 0's 80-token prompt needs five chunks, four done (4 blocks of 16) when the
    # check at t=1 aborts it; request 1 (sent 0.9, one block) runs at once: its only token at 1.25.
    env, engine, recorder = _engine(max_num_seqs=1, budget=16)
    feed(env, engine, [request(0, 0.0, 80, 4), request(1, 0.9, 16, 1)])
    env.run(until=0.99)
    assert engine.kv.pool.num_free == 100 - 4
    env.run(until=1.1)
    assert engine.kv.pool.num_free == 100 - 1  # request 0's four blocks back, request 1's one taken
    env.run(until=20)
    assert _nan_as_none(_rows(recorder)) == [
        (0, "aborted", "client timeout after 1 s", 0.0, None, None),
        (1, "finished", "", 1.0, 1.25, 1.25),
    ]
    assert engine.kv.pool.num_free == 100


@pytest.mark.parametrize("closed_form", [True, False])
def test_a_deadline_inside_a_decode_run_aborts_the_request_after_the_iteration_in_progress(closed_form: bool) -> None:
    # one request, 16-token prompt, 100 tokens, its client gives up 1.1 s after sending: the run of decodes
    # (0.25 s each) is cut at the deadline, the iteration in progress (1.0 .. 1.25) ends, and the request is
    # aborted at 1.25 with 5 tokens out (0.25, ..., 1.25) and its blocks freed; the same when stepping
    env, recorder = simpy.Environment(), Recorder(0.0)
    cfg = engine_config(max_num_seqs=4, max_num_batched_tokens=8192, block_size=16)
    engine = Engine(
        env, cfg, LinearStepModel(0.25), 100, recorder, closed_form_decode=closed_form, client_timeout_s=1.1
    )
    feed(env, engine, [request(0, 0.0, 16, 100)])
    env.run(until=1.2)
    assert len(recorder.rows) == 0  # not before its deadline's iteration ends
    env.run(until=20)
    (row,) = recorder.rows
    assert (row[STATUS], row[REQUEST_COLUMNS.index("generated_tokens")]) == ("aborted", 5)
    assert engine.kv.pool.num_free == 100


def test_a_request_done_after_its_client_gave_up_is_recorded_as_aborted_without_what_the_client_never_saw() -> None:
    # the recorder with a 0.3 s timeout: a request finished at 0.4 (sent at 0) is aborted for its client, no e2e;
    # one whose first token came at 0.35 has no TTFT either; one finished at 0.3 exactly is finished
    recorder = Recorder(0.0)
    recorder.client_timeout_s = 0.3
    for rid, first, finish in ((0, 0.1, 0.4), (1, 0.35, 0.5), (2, 0.1, 0.3)):
        state = RequestState(request(rid, 0.0, 16, 3))
        state.first_token_s = state.visible_s = first
        state.finish_s, state.num_output, state.status = finish, 3, "finished"
        recorder.request(state, 0)
    frame = recorder.requests_frame().set_index("request_id")
    assert list(frame["status"]) == ["aborted", "aborted", "finished"]
    assert frame.loc[0, "reason"] == "client timeout after 0.3 s" and frame.loc[0, "ttft_s"] == 0.1
    assert frame["e2e_s"].isna().tolist() == [True, True, False] and frame["ttft_s"].isna().tolist() == [
        False,
        True,
        False,
    ]


def _at_horizon(closed_form: bool, horizon: float, requests: list[Request]) -> list[tuple[int, int, int, int]]:
    """What each request in flight holds when the run stops at `horizon`: id, tokens out, blocks, and the
    pool's free blocks (what a results row and the KV gauge read)."""
    env, recorder = simpy.Environment(), Recorder(0.0)
    cfg = engine_config(max_num_seqs=4, max_num_batched_tokens=8192, block_size=16)
    engine = Engine(env, cfg, LinearStepModel(0.25), 100, recorder, closed_form_decode=closed_form)
    engine.attach_feed(list(requests))
    env.run(until=horizon)
    return [
        (s.rid, s.num_output, len(engine.kv.blocks.get(s.rid, ())), engine.kv.pool.num_free) for s in engine.in_flight()
    ]


def test_a_decode_run_cut_by_the_horizon_leaves_what_stepping_leaves() -> None:
    # one request, 16-token prompt (one block), 40 tokens: prefill 0-0.25 (token 1), then a decode every
    # 0.25 s. At the horizon 1.0 the decodes ending at 0.5 and 0.75 are done (tokens 2 and 3); the one
    # ending exactly at 1.0 is not (SimPy stops before events at the horizon, as stepping does) but holds
    # its blocks: token 17 went into a second block at the first decode.
    one = [request(0, 0.0, 16, 40)]
    assert _at_horizon(True, 1.0, one) == _at_horizon(False, 1.0, one) == [(0, 3, 2, 98)]
    assert _at_horizon(True, 1.1, one) == [(0, 4, 2, 98)]
    # 4.5: tokens 1-17 done (ends 0.25 .. 4.25); the decode in progress writes token 17's KV at position 32:
    # the third block
    assert _at_horizon(True, 4.5, one) == _at_horizon(False, 4.5, one) == [(0, 17, 3, 97)]
    # three requests, the third arriving in the middle of the first two's run, horizons on and off the ends
    three = [request(0, 0.0, 16, 40), request(1, 0.0, 30, 40), request(2, 1.6, 20, 40)]
    for horizon in (0.25, 1.0, 1.6, 1.75, 2.3, 5.0):
        assert _at_horizon(True, horizon, three) == _at_horizon(False, horizon, three), horizon
    # a 15-token prompt: the first decode (0.25 .. 0.5) writes position 15 and fills block 0, the second
    # (0.5 .. 0.75), the run's second iteration, writes position 16 in a new block: at 0.8 both are done,
    # 3 tokens out, 2 blocks held
    fifteen = [request(0, 0.0, 15, 40)]
    assert _at_horizon(True, 0.8, fifteen) == _at_horizon(False, 0.8, fifteen) == [(0, 3, 2, 98)]


def test_at_the_horizon_a_request_that_arrived_during_an_iteration_is_in_flight_from_its_arrival() -> None:
    # 0 and 1 decode in steps of 0.25 s; 2 arrives at 1.6, during the step 1.5 .. 1.75, and the engine would
    # take it in at 1.75. At the horizon 1.7 it has arrived: in flight, waiting, sent at 1.6 (not at 1.7);
    # 3, arriving exactly at the horizon, has not (SimPy stops before events at the horizon).
    cfg = engine_config(max_num_seqs=4, max_num_batched_tokens=8192, block_size=16)
    for closed_form in (True, False):
        env, recorder = simpy.Environment(), Recorder(0.0)
        engine = Engine(env, cfg, LinearStepModel(0.25), 100, recorder, closed_form_decode=closed_form)
        requests = [request(0, 0.0, 16, 40), request(1, 0.0, 30, 40), request(2, 1.6, 20, 40), request(3, 1.7, 8, 4)]
        engine.attach_feed(requests)
        env.run(until=1.7)
        flight = [(s.rid, s.num_output, s.submitted_s, s.first_scheduled_s) for s in engine.in_flight()]
        assert flight == [(0, 6, 0.0, 0.0), (1, 6, 0.0, 0.0), (2, 0, 1.6, -1.0)], closed_form


def test_out_of_blocks_the_last_running_request_is_preempted_and_recomputed_from_its_cached_prompt() -> None:
    # Four blocks of 16 tokens, two requests of 16-token prompts and 20 tokens out. Prefill 0-0.25 (blocks 0
    # and 1), token 1 at 0.25; the first decode puts token 17 in a second block each (blocks 2 and 3). Decode
    # i (0.25 i to 0.25 (i+1)) writes position 16 + i: the 17th needs a third block and none is free, so at
    # 4.25 request 1 (the last running, FCFS) is preempted: its full blocks are cached and freed tail first,
    # request 0 takes block 3 (the tail's) and finishes its 20th token at 5.0 alone. Request 1 comes back
    # at 5.0: 33 tokens, of which block 1 (its prompt) is still cached, so 17 are recomputed in one step,
    # its 18th-20th tokens at 5.25, 5.5, 5.75.
    for closed_form in (True, False):
        env, recorder = simpy.Environment(), Recorder(0.0)
        cfg = engine_config(max_num_seqs=4, block_size=16)
        engine = Engine(env, cfg, LinearStepModel(0.25), 4, recorder, closed_form_decode=closed_form)
        engine.attach_feed([request(0, 0.0, 16, 20), request(1, 0.0, 16, 20)])
        if not closed_form:  # stepping: the block table is exact between iterations
            env.run(until=4.3)
            assert engine.kv.blocks[0] == [0, 2, 3] and 1 not in engine.kv.blocks
            assert engine.kv.pool.num_free == 1
        env.run(until=100)
        preemptions, first_preempt = (REQUEST_COLUMNS.index(c) for c in ("num_preemptions", "first_preempt_s"))
        assert [
            (r[0], r[FINISH], r[preemptions], r[first_preempt] if r[preemptions] else None) for r in recorder.rows
        ] == [
            (0, 5.0, 0, None),
            (1, 5.75, 1, 4.25),
        ]
        # (start, tokens, running, waiting) of each iteration; a closed-form decode run is one row
        steps = [(s[0], s[3], s[4], s[5]) for s in recorder.steps]
        decodes = [(0.25, 32, 2, 0)] if closed_form else [(0.25 * i, 2, 2, 0) for i in range(1, 17)]
        alone = [(4.25, 1, 1, 1), (4.5, 2, 1, 1)] if closed_form else [(4.25, 1, 1, 1), (4.5, 1, 1, 1), (4.75, 1, 1, 1)]
        back = [(5.0, 17, 1, 0), (5.25, 2, 1, 0)] if closed_form else [(5.0, 17, 1, 0), (5.25, 1, 1, 0), (5.5, 1, 1, 0)]
        assert steps == [(0.0, 32, 2, 0), *decodes, *alone, *back]
        # the iterations each row stands for: 1 prefill + 16 decodes + 3 alone + the recompute and 2 decodes
        stands_for = [s[-1] for s in recorder.steps]
        assert stands_for == ([1, 16, 1, 2, 1, 2] if closed_form else [1] * 23)
        assert [s[1] for s in recorder.steps] == [0.25 * n for n in stands_for]  # a row lasts all its iterations


def test_every_inter_token_gap_of_a_batch_is_counted_once_per_request() -> None:
    # two requests of 10 tokens decoding together, a third of 3 tokens arriving at 0.6 and prefilled in the
    # step 0.75 .. 1.0 beside their decodes; every step 0.25 s: 9 + 9 + 2 gaps of 0.25 s, whether the
    # decodes are stepped one by one or run in closed form (cut by the arrival, stepped in the mixed batch)
    for closed_form in (True, False):
        env, recorder = simpy.Environment(), Recorder(0.0)
        cfg = engine_config(max_num_seqs=4, block_size=16)
        engine = Engine(env, cfg, LinearStepModel(0.25), 100, recorder, closed_form_decode=closed_form)
        engine.attach_feed([request(0, 0.0, 16, 10), request(1, 0.0, 16, 10), request(2, 0.6, 16, 3)])
        env.run(until=100)
        values, weights = recorder.itl_samples()
        assert (set(values[weights > 0].tolist()), float(weights.sum())) == ({0.25}, 20.0), closed_form


def _pushed(closed_form: bool, async_scheduling: bool, requests: list[Request]) -> list[tuple[object, ...]]:
    env, recorder = simpy.Environment(), Recorder(0.0)
    cfg = engine_config(max_num_seqs=4, block_size=16, async_scheduling=async_scheduling)
    engine = Engine(env, cfg, LinearStepModel(0.25), 100, recorder, closed_form_decode=closed_form)
    feed(env, engine, requests)  # pushed as they arrive: a push cuts a decode run after the iteration in progress
    env.run(until=100)
    return _nan_as_none(_rows(recorder))


def test_a_push_cuts_a_decode_run_where_stepping_would_take_the_request_in() -> None:
    # request 0 decodes from 0.25 in steps of 0.25 s. Synchronous: 1 arrives at 1.1 (in the step 1.0 .. 1.25)
    # or exactly at 1.0 (a step end) and is scheduled at the next step start, 1.25 or 1.0, its token 0.25 s
    # later. Async scheduling (vLLM: the next step is scheduled while the current one runs): a request that
    # arrives while step k runs enters step k + 2, so from 1.5 (sent at 1.1) and 1.25 (sent at 1.0, while the
    # step 1.0 .. 1.25 was already scheduled). The closed-form run cut by the push gives what stepping gives.
    for async_scheduling, (mid, at_end) in ((False, (1.25, 1.0)), (True, (1.5, 1.25))):
        for sent, scheduled in ((1.1, mid), (1.0, at_end)):
            requests = [request(0, 0.0, 16, 20), request(1, sent, 16, 3)]
            rows = _pushed(True, async_scheduling, requests)
            assert rows == _pushed(False, async_scheduling, requests), (async_scheduling, sent)
            assert rows[0] == (1, "finished", "", scheduled, scheduled + 0.25, scheduled + 0.75), (
                async_scheduling,
                sent,
            )


def _preemptions(blocks: int, requests: list[Request], closed_form: bool) -> tuple[list[tuple[object, ...]], list[int]]:
    env, recorder = simpy.Environment(), Recorder(0.0)
    engine = Engine(env, engine_config(max_num_seqs=4, block_size=16), LinearStepModel(0.25), blocks, recorder,
                    closed_form_decode=closed_form)  # fmt: skip
    engine.attach_feed(requests)
    env.run(until=200)
    count, first, cached = (REQUEST_COLUMNS.index(c) for c in ("num_preemptions", "first_preempt_s", "cached_tokens"))
    rows: list[tuple[object, ...]] = [
        (r[0], r[SCHEDULED], r[FIRST], r[FINISH], r[count], r[first] if r[count] else None, r[cached])
        for r in recorder.rows
    ]
    return rows, [s[3] for s in recorder.steps]


def test_a_request_preempted_twice_counts_both_and_keeps_its_first_preemption_time() -> None:
    # Five blocks, three requests of 16-token prompts and 40 tokens out. Prefill 0-0.25 takes blocks 0-2; the
    # first decode (from 0.25) needs a second block for each and two are free: request 2, the last running,
    # is preempted at 0.25. 0 and 1 decode until position 32 (the decode from 4.25) needs a third block each and
    # one is free: 1 is preempted at 4.25. 0 finishes alone at 0.25 + 39 x 0.25 = 10.0; 2 comes back and is
    # preempted again later; its first preemption time stays 0.25, and its first scheduling (0.0) and first
    # token (0.25) stay what the client saw: re-admissions do not move them.
    three = [request(0, 0.0, 16, 40), request(1, 0.0, 16, 40), request(2, 0.0, 16, 40)]
    rows, _ = _preemptions(5, three, True)
    assert rows == _preemptions(5, three, False)[0]
    # TTFT's split is the first admission's: no prefix hit then (2's later hit of its own prompt is not one)
    assert [cached for _, _, _, _, _, _, cached in rows] == [0, 0, 0]
    rows = [row[:-1] for row in rows]
    assert rows[0] == (0, 0.0, 0.25, 10.0, 0, None)
    assert [(rid, scheduled, token, count, first) for rid, scheduled, token, _, count, first in rows[1:]] == [
        (1, 0.0, 0.25, 1, 4.25),
        (2, 0.0, 0.25, 2, 0.25),
    ]


def test_a_private_request_preempted_finds_its_own_blocks_as_a_shared_one_does() -> None:
    # the case of test_out_of_blocks_...: vLLM hashes every block as it fills, so a preempted request finds its
    # prompt's block again whether or not another request could share it; ttftsim hashes a private request's
    # blocks only when it is preempted, with the same result (17 tokens recomputed at 5.0, not 33)
    shared = [request(0, 0.0, 16, 20), request(1, 0.0, 16, 20)]
    private = [r.replace(private=True) for r in shared]
    for closed_form in (True, False):
        assert _preemptions(4, private, closed_form) == _preemptions(4, shared, closed_form)
        assert 17 in _preemptions(4, private, closed_form)[1]


def test_a_binding_token_budget_splits_prefills_behind_the_decodes_on_both_paths() -> None:
    # 40 tokens a step, every step 0.25 s; three 16-token prompts at 0, then prompts of 100 (at 0.6), 70 (1.1)
    # and 20 (1.3). Running requests first, in admission order, a decode one token, a prefill what is left:
    #   0.0   0 and 1 take 16 each, 2 a chunk of 8                         40 tokens, 3 running
    #   0.25  2 decodes + 2's last 8                                        10
    #   0.5   3 decodes                                                      3
    #   0.75  3 decodes + 37 of request 3's 100                             40, 4 running
    #   1.0   3 decodes + 37                                                40
    #   1.25  3 decodes + 3's last 26 + 11 of request 4's 70 (sent 1.1)    40, 5 running
    #   1.5   4 decodes + 36 of 4's; 5 (sent 1.3) gets no budget: waits    40, 5 running, 1 waiting
    #   1.75  4 decodes + 4's last 23 + 13 of 5's 20                        40, 6 running
    # the fast paths (the decode cohort scheduled at once; closed-form decode runs) schedule what the
    # per-request loop does, also when 12 blocks force preemptions
    requests = [request(0, 0.0, 16, 30), request(1, 0.0, 16, 30), request(2, 0.0, 16, 30)]
    requests += [request(3, 0.6, 100, 5), request(4, 1.1, 70, 5), request(5, 1.3, 20, 10)]
    hand = [(0.0, 40, 3, 0), (0.25, 10, 3, 0), (0.5, 3, 3, 0), (0.75, 40, 4, 0), (1.0, 40, 4, 0)]
    hand += [(1.25, 40, 5, 0), (1.5, 40, 5, 1), (1.75, 40, 6, 0)]
    for blocks in (100, 12):
        runs = []
        for closed_form, cohort in ((True, True), (False, True), (False, False)):
            env, recorder = simpy.Environment(), Recorder(0.0)
            cfg = engine_config(max_num_seqs=8, block_size=16, max_num_batched_tokens=40)
            engine = Engine(env, cfg, LinearStepModel(0.25), blocks, recorder, closed_form_decode=closed_form)
            engine.scheduler.use_cohort = cohort  # False: every running request visited one by one
            engine.attach_feed(list(requests))
            env.run(until=200)
            runs.append(_nan_as_none(_rows(recorder)))
            if blocks == 100:
                assert [(s[0], s[3], s[4], s[5]) for s in recorder.steps][:8] == hand, (closed_form, cohort)
        assert runs[0] == runs[1] == runs[2], blocks


def _steps(
    cfg: ResolvedEngine, blocks: int, requests: list[Request], count: int = 8
) -> list[tuple[float, int, int, int]]:
    """(start, tokens, running, waiting) of the first `count` iterations, stepped one by one."""
    env, recorder = simpy.Environment(), Recorder(0.0)
    engine = Engine(env, cfg, LinearStepModel(0.25), blocks, recorder, closed_form_decode=False)
    engine.attach_feed(requests)
    env.run(until=100)
    return [(s[0], s[3], s[4], s[5]) for s in recorder.steps][:count]


def test_long_prefill_token_threshold_caps_each_step_of_a_long_prompt() -> None:
    # vLLM scheduler: 0 < long_prefill_token_threshold < num_new_tokens -> num_new_tokens = the threshold
    cfg = engine_config(long_prefill_token_threshold=32, block_size=16)
    assert _steps(cfg, 100, [request(0, 0.0, 100, 2)]) == [
        (0.0, 32, 1, 0),
        (0.25, 32, 1, 0),
        (0.5, 32, 1, 0),
        (0.75, 4, 1, 0),
        (1.0, 1, 1, 0),
    ]


def test_without_chunked_prefill_a_prompt_exactly_the_budget_left_is_admitted_whole() -> None:
    # budget 64 = max_model_len; two 32-token prompts: the second fits the 32 tokens left exactly
    cfg = engine_config(enable_chunked_prefill=False, max_num_batched_tokens=64, max_model_len=64, block_size=16)
    two = [request(0, 0.0, 32, 4), request(1, 0.0, 32, 4)]
    assert _steps(cfg, 100, two, 4) == [(0.0, 64, 2, 0), (0.25, 2, 2, 0), (0.5, 2, 2, 0), (0.75, 2, 2, 0)]


def test_reserving_the_full_prompt_keeps_a_long_prompt_waiting_until_all_of_it_fits() -> None:
    # Eight blocks of 16, 32 tokens a step. Request 0 (16-token prompt) holds two blocks from its first decode
    # at 0.25; request 1 (100-token prompt: 7 blocks) arrives at 0.1. vLLM 0.32 (scheduler_reserve_full_isl)
    # admits it only when its whole prompt fits: it waits, 6 blocks free. Without the reserve its chunk of 31
    # (the budget after the decode) is admitted at 0.25, and more at 0.5 and 0.75, until at 1.0 its 7th
    # block is not there and it, the last running, is preempted.
    pair = [request(0, 0.0, 16, 40), request(1, 0.1, 100, 2)]
    waits = [(0.0, 16, 1, 0)] + [(0.25 * i, 1, 1, 1) for i in range(1, 8)]
    assert _steps(engine_config(max_num_batched_tokens=32, block_size=16, reserve_full_prompt=True), 8, pair) == waits
    chunks = [(0.0, 16, 1, 0), (0.25, 32, 2, 0), (0.5, 32, 2, 0), (0.75, 32, 2, 0)]
    chunks += [(0.25 * i, 1, 1, 1) for i in range(4, 8)]
    assert _steps(engine_config(max_num_batched_tokens=32, block_size=16, reserve_full_prompt=False), 8, pair) == chunks
