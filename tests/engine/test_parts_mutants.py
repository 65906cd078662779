"""The engine's small parts on their own, by hand: waiting-queue orders, preemption policy choice, a
request's state, the decode cohort's clock and buckets, the API server's cost rules and its fast path,
speculative acceptance against its expected value, LoRA slots' eviction. The cases the mutation run
(docs/testing.md) showed the engine tests could not tell apart."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.factories import engine_config, feed, make_engine, request
from ttftsim.engine.api_server import ApiServer, ApiServerCostsS
from ttftsim.engine.cohort import DecodeCohort
from ttftsim.engine.decode_run import DecodeRun, RunTimes, blocks_cover, run_times
from ttftsim.engine.engine import Engine
from ttftsim.engine.lora import LoraSlots
from ttftsim.engine.preemption import LastRunning, LowestPriority, make_preemption
from ttftsim.engine.queues import FcfsQueue, PriorityQueue, make_queue, pop_all
from ttftsim.engine.recorder import REQUEST_COLUMNS, Recorder
from ttftsim.engine.speculative import DraftAcceptance
from ttftsim.engine.state import RequestState
from ttftsim.perf.linear import LinearStepModel


def _state(rid: int, arrival: float = 0.0, priority: int = 0, prompt: int = 16, output: int = 4) -> RequestState:
    return RequestState(request(rid, arrival, prompt, output, priority=priority))


# ---- queues and policies ----


def test_fcfs_puts_a_preempted_request_back_in_front() -> None:
    queue = make_queue("fcfs")
    assert isinstance(queue, FcfsQueue)
    a, b, c = _state(0), _state(1), _state(2)
    queue.add(a)
    queue.add(b)
    queue.prepend(c)
    assert len(queue) == 3 and queue.peek() is c
    assert [s.rid for s in pop_all(queue)] == [2, 0, 1]
    assert len(queue) == 0 and pop_all(queue) == []


def test_priority_orders_by_priority_then_arrival_then_id_and_prepend_is_add() -> None:
    queue = make_queue("priority")
    assert isinstance(queue, PriorityQueue)
    for state in (_state(0, 0.0, 1), _state(1, 2.0, 0), _state(3, 1.0, 0)):
        queue.add(state)
    queue.prepend(_state(2, 1.0, 0))  # same key as request 3 but a smaller id: ahead of it, not at the front
    assert queue.peek().rid == 2 and len(queue) == 4
    assert [s.rid for s in pop_all(queue)] == [2, 3, 1, 0]


def test_the_preemption_policy_by_name() -> None:
    fcfs, priority = make_preemption("fcfs"), make_preemption("priority")
    assert isinstance(fcfs, LastRunning) and fcfs.takes_tail
    assert isinstance(priority, LowestPriority) and not priority.takes_tail
    # equal priority and arrival: the larger id is the victim
    assert priority.victim_index([_state(5, 1.0, 2), _state(7, 1.0, 2), _state(6, 1.0, 2)]) == 1


# ---- a request's state ----


def test_a_new_state_and_its_token_counts() -> None:
    state = _state(4, arrival=2.5, prompt=20, output=5)
    assert (state.status, state.rid, state.submitted_s, state.num_tokens) == ("waiting", 4, 2.5, 20)
    assert not state.is_decoding  # no output yet
    assert state.token_segments() == [(1004, 20)]
    state.num_output, state.num_computed = 2, 21
    assert state.num_tokens == 22 and state.is_decoding  # all but the newest token computed
    assert state.token_segments() == [(1004, 20), (-6, 2)]  # its own generated tokens: content id -(4 + 2)
    state.num_computed = 20
    assert not state.is_decoding


# ---- the decode cohort ----


def _member(rid: int, computed: int, output: int, admit_seq: int) -> RequestState:
    state = _state(rid, prompt=computed, output=output)
    state.num_computed, state.num_output, state.admit_seq = computed, 1, admit_seq
    return state


def test_the_cohort_clock_buckets_and_finishes() -> None:
    cohort = DecodeCohort(4)
    a, b, c = _member(0, 6, 3, 10), _member(1, 3, 6, 11), _member(2, 7, 9, 12)
    for state in (c, a, b):
        cohort.join(state)
    assert (cohort.size, cohort.kv_tokens) == (3, 7 + 4 + 8)
    assert [cohort.count_before(seq) for seq in (10, 11, 12, 13)] == [0, 1, 2, 3]
    # the token computed at clock k is number computed + k; it needs a new block when that is a multiple of 4
    assert [s.rid for s in cohort.due(1)] == [1, 2]  # 3 + 1 = 4 and 7 + 1 = 8, in running order
    assert [s.rid for s in cohort.due(2)] == [0]  # 6 + 2 = 8
    assert cohort.due(3) == [] and cohort.due_count(3) == 0
    assert [s.rid for s in cohort.due(5)] == [1, 2] and cohort.due_count(6) == 1  # 3 + 5 = 8, 7 + 5 = 12
    assert cohort.steps_to_next_finish() == 2  # request 0 has 2 more tokens to generate
    cohort.advance(2)
    assert cohort.kv_tokens == 19 + 6
    assert [s.rid for s in cohort.pop_finished()] == [0]
    assert (a.num_computed, a.num_output) == (8, 3)
    assert cohort.size == 2 and cohort.kv_tokens == 25 - 9
    cohort.leave(b)  # b's finish entry goes stale
    assert (b.num_computed, b.num_output) == (5, 3)
    assert cohort.steps_to_next_finish() == 6  # c: 8 more tokens from clock 0
    cohort.advance(1)
    cohort.dissolve()
    assert (c.num_computed, c.num_output, c.sync_clock) == (10, 4, 3)
    assert (cohort.size, cohort.kv_tokens, cohort.members) == (0, 0, {})
    assert cohort.steps_to_next_finish() == 1 << 30 and cohort.due_count(0) == 0
    cohort.join(c)
    c.num_computed += 1  # changed without a sync: its bucket no longer holds it, and leaving says so
    with pytest.raises(KeyError):
        cohort.leave(c)


# ---- the API server ----


def test_the_server_is_free_only_when_every_cost_is_zero() -> None:
    assert ApiServerCostsS().is_free
    for field in ("per_request_s", "per_prompt_token_s", "per_output_token_s", "per_step_s"):
        assert not ApiServerCostsS(**{field: 0.001}).is_free


def test_ingress_pays_per_request_and_per_prompt_token() -> None:
    api = ApiServer(ApiServerCostsS(per_request_s=0.001, per_prompt_token_s=1e-5))
    assert api.ingress(1.0, 100) == pytest.approx(1.002, abs=1e-12)
    assert api.ingress(1.0, 0) == pytest.approx(1.003, abs=1e-12)  # queued behind the first


def test_a_decode_run_that_never_backs_up_takes_the_fast_path_at_its_bounds() -> None:
    costs = ApiServerCostsS(per_step_s=0.002)  # 2 ms per step's batch, whatever its size
    api = ApiServer(costs)
    api.free_at = 1.010  # exactly when the first step ends
    api.output_run(1.0, [0.010, 0.012, 0.014], [0.010, 0.002, 0.002], 4)  # work 2 ms = the shortest step
    assert api.free_at == pytest.approx(1.016, abs=1e-12)
    backed = ApiServer(costs)
    backed.free_at = 1.0105  # still busy when the first step ends: 1.0125, then 1.0145, then 1.0165
    backed.output_run(1.0, [0.010, 0.012, 0.014], [0.010, 0.002, 0.002], 4)
    assert backed.free_at == pytest.approx(1.0165, abs=1e-12)
    slow = ApiServer(ApiServerCostsS(per_step_s=0.003))  # 3 ms of work per 2 ms step: backs up
    slow.output_run(1.0, [0.010, 0.012, 0.014], [0.010, 0.002, 0.002], 4)
    assert slow.free_at == pytest.approx(1.019, abs=1e-12)  # 1.013, 1.016, 1.019


def test_a_run_with_no_work_or_no_steps_changes_nothing() -> None:
    free = ApiServer(ApiServerCostsS())
    free.output_run(1.0, [0.01], [0.01], 4)
    assert free.free_at == 0.0
    busy = ApiServer(ApiServerCostsS(per_step_s=0.001))
    busy.output_run(1.0, [], [], 4)
    assert busy.free_at == 0.0
    busy.output_run(1.0, [0.01], [0.01], 0)  # steps that sampled nothing
    assert busy.free_at == 0.0
    assert busy.costs.output_s(0) == 0.0 and busy.costs.output_s(3) == 0.001


def test_a_run_hands_each_iterations_tokens_once() -> None:
    api = ApiServer(ApiServerCostsS(per_step_s=0.015))  # 15 ms of output work per 10 ms step: it backs up
    run = DecodeRun(2.0, RunTimes([0.01, 0.02, 0.03], [0.01, 0.01, 0.01]))
    run.hand_tokens(api, 2, 3)  # 2.010 + 0.015, then 2.025 + 0.015
    assert run.handed == 2 and api.free_at == pytest.approx(2.040, abs=1e-12)
    run.hand_tokens(api, 2, 3)  # nothing new
    run.hand_tokens(api, 1, 3)
    assert run.handed == 2 and api.free_at == pytest.approx(2.040, abs=1e-12)
    run.hand_tokens(api, 3, 3)
    assert run.handed == 3 and api.free_at == pytest.approx(2.055, abs=1e-12)


def test_crossings_count_the_clocks_each_member_is_due_at() -> None:
    cohort = DecodeCohort(4)
    a, b, c = _member(0, 6, 30, 10), _member(1, 3, 30, 11), _member(2, 7, 30, 12)  # due at clocks 2, 1, 1 (mod 4)
    a.is_anonymous_kv = c.is_anonymous_kv = True
    for state in (a, b, c):
        cohort.join(state)
    assert cohort.num_identified == 1  # b's blocks have ids
    assert sorted(cohort.crossings(1, 1)) == [(1, 1), (2, 1)]  # fewer clocks than a block: clock by clock
    assert cohort.crossings(3, 3) == []
    assert sorted(cohort.crossings(1, 5)) == [(0, 1), (1, 2), (2, 2)]  # a block's worth and one: 1, 2, 3, 4, 5
    assert sorted(cohort.crossings(2, 9)) == [(0, 2), (1, 2), (2, 2)]  # two whole blocks
    assert sorted(cohort.crossings(3, 6)) == [(0, 1), (1, 1), (2, 1)]
    cohort.leave(b)
    assert cohort.num_identified == 0
    cohort.join(b)
    assert cohort.num_identified == 1
    cohort.dissolve()
    assert (cohort.num_identified, cohort.size) == (0, 0)


@given(
    computed=st.lists(st.integers(1, 300), min_size=1, max_size=12),
    block=st.sampled_from([1, 2, 4, 16]),
    advanced=st.integers(0, 40),
    first=st.integers(0, 60),
    span=st.integers(1, 70),
)
@settings(max_examples=200, deadline=None)
def test_crossings_agree_with_due_clock_by_clock(
    computed: list[int], block: int, advanced: int, first: int, span: int
) -> None:
    cohort = DecodeCohort(block)
    for rid, tokens in enumerate(computed):
        cohort.join(_member(rid, tokens, 1000, rid))
    cohort.advance(advanced)
    first += cohort.clock
    expected = Counter(s.rid for clock in range(first, first + span) for s in cohort.due(clock))
    counts = cohort.crossings(first, first + span - 1)
    assert len(counts) == len({rid for rid, _ in counts})  # a member once
    assert dict(counts) == dict(expected)


def _cohort(*computed: int) -> DecodeCohort:
    cohort = DecodeCohort(16)
    for rid, tokens in enumerate(computed):
        cohort.join(_member(rid, tokens, 1000, rid))
    return cohort


def test_blocks_cover_starts_at_the_second_iteration_and_checks_the_last() -> None:
    # 16 computed: its token at clock 0 fills block 1 exactly, so the next needs a block only at clock 16
    assert blocks_cover(_cohort(16), 0, 10) == 10
    # 14 and 15 computed: new blocks at clocks 1 (iteration 2) and 2 (iteration 3); one free block covers 2
    assert blocks_cover(_cohort(14, 15), 1, 3) == 2
    assert blocks_cover(_cohort(14, 15), 1, 2) == 2


def test_a_run_ends_with_the_iteration_that_ends_exactly_at_the_arrival() -> None:
    step = 2.0**-7  # iterations of exactly 7.8125 ms: their ends add up without rounding
    cost = LinearStepModel(step)
    short = run_times(cost, _cohort(100), 101, 4096, 20 * step, None)  # 21 steps at most: Python
    assert len(short.ends) == 20 and short.ends[-1] == 20 * step
    long = run_times(cost, _cohort(100), 101, 4096, 40 * step, None)  # 41 steps at most: numpy
    assert len(long.ends) == 40 and long.ends[-1] == 40 * step
    inside = run_times(cost, _cohort(100), 101, 4096, 40.5 * step, None)  # the arrival falls in iteration 41
    assert len(inside.ends) == 41 and list(inside.durations) == [step] * 41


# ---- speculative decoding and LoRA ----


def test_accepted_drafts_average_the_rejection_samplers_expectation() -> None:
    # draft i is accepted with probability a^i (all before it accepted): E = a (1 - a^k) / (1 - a)
    for rate, drafts in ((0.6, 3), (0.8, 5)):
        acceptance = DraftAcceptance(rate, seed=7, replica=0)
        mean = np.mean([acceptance.accepted(drafts) for _ in range(20000)])
        assert mean == pytest.approx(rate * (1 - rate**drafts) / (1 - rate), rel=0.02)
    never = DraftAcceptance(0.0, seed=1, replica=0)
    assert [never.accepted(4) for _ in range(50)] == [0] * 50
    always = DraftAcceptance(0.999999, seed=1, replica=0)
    assert [always.accepted(4) for _ in range(50)] == [4] * 50


def test_acceptance_is_seeded_per_replica() -> None:
    one, again, other = DraftAcceptance(0.5, 3, 0), DraftAcceptance(0.5, 3, 0), DraftAcceptance(0.5, 3, 1)
    draws = [one.accepted(8) for _ in range(40)]
    assert draws == [again.accepted(8) for _ in range(40)]
    assert draws != [other.accepted(8) for _ in range(40)]


def test_lora_slots_evict_the_least_recently_used_on_each_tier() -> None:
    slots = LoraSlots(gpu_slots=2, cpu_slots=2, h2d_s=0.001, read_s=0.1)
    assert slots.load_s({1}) == pytest.approx(0.101)
    assert slots.load_s({2}) == pytest.approx(0.101)
    assert slots.load_s({1}) == 0.0  # a hit makes 1 the most recent GPU slot
    assert slots.load_s({1, 3}) == pytest.approx(0.101)  # 1 in its slot; 3 evicts 2 from the GPU, 1 from host
    assert list(slots.gpu) == [1, 3] and list(slots.cpu) == [2, 3]
    assert slots.load_s({2}) == pytest.approx(0.001)  # still in host memory: copied only
    assert slots.load_s({1}) == pytest.approx(0.101)  # evicted from both: read again
    assert (slots.loads, slots.reads) == (5, 4)


def test_a_tiny_runs_rows_for_a_finished_and_an_in_flight_request() -> None:
    """10 ms + 1 ms per token; both prompts (20 + 30 tokens) prefill together: first tokens at 60 ms; two
    decode steps of 12 ms finish request 0 at 84 ms; request 1 is still decoding at 200 ms."""
    env, engine, recorder = make_engine(cost=LinearStepModel(0.01, 0.001))
    feed(env, engine, [request(0, 0.0, 20, 3), request(1, 0.0, 30, 100)])
    env.run(until=0.2)
    for state in engine.in_flight():
        recorder.request(state, 0, "in_flight")
    rows = recorder.requests_frame().set_index("request_id")
    done, running = rows.loc[0], rows.loc[1]
    assert (done["status"], done["reason"], running["status"], running["reason"]) == ("finished", "", "in_flight", "")
    assert done["finish_s"] == pytest.approx(0.084, abs=1e-12) and done["e2e_s"] == pytest.approx(0.084, abs=1e-12)
    assert done["tpot_s"] == pytest.approx(0.012, abs=1e-12)
    assert np.isnan(running["finish_s"]) and np.isnan(running["e2e_s"]) and np.isnan(running["tpot_s"])
    for row in (done, running):
        assert row["ttft_s"] == pytest.approx(0.060, abs=1e-12)
        assert (row["queue_s"], row["recompute_s"], row["waiting_s"]) == (0.0, 0.0, 0.0)
        assert row["prefill_s"] == pytest.approx(0.060, abs=1e-12)
        assert row["cached_tokens"] == 0 and row["num_preemptions"] == 0 and np.isnan(row["first_preempt_s"])


def test_a_row_held_at_the_gateway_with_a_frontend_overhead_by_hand() -> None:
    """A request that arrived at 0 reaches the engine at 0.5 s (held at a gateway), a 0.25 s frontend overhead:
    10 ms + 1 ms per token, its 20-token prefill ends at 0.53 s, its second and last token at 0.541 s. The
    client's TTFT is 0.53 + 0.25, its end-to-end 0.541 + 0.25; the gateway's hold 0.5 s, no queue, recompute or
    wait; TPOT over two tokens 11 ms. The frame has exactly the recorder's columns, indexed 0..n-1."""
    env = simpy.Environment()
    recorder = Recorder(0.25)
    engine = Engine(env, engine_config(), LinearStepModel(0.01, 0.001), 1000, recorder)

    def held() -> Any:
        yield env.timeout(0.5)
        engine.submit(request(7, 0.0, 20, 2))

    env.process(held())
    env.run()
    frame = recorder.requests_frame()
    assert tuple(frame.columns) == REQUEST_COLUMNS and list(frame.index) == [0]
    row = frame.iloc[0]
    expected = {"ttft_s": 0.78, "e2e_s": 0.791, "gateway_s": 0.5, "frontend_s": 0.25, "tpot_s": 0.011}
    assert {key: row[key] for key in expected} == pytest.approx(expected, abs=1e-12)
    assert (row["queue_s"], row["recompute_s"]) == (0.0, 0.0) and row["waiting_s"] == pytest.approx(0.0, abs=1e-12)
    assert row["prefill_s"] == pytest.approx(0.03, abs=1e-12) and row["first_scheduled_s"] == 0.5
