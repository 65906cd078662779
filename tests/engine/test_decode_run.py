"""Closed-form decode runs (engine/decode_run.py): their length and iteration times, by hand."""

from __future__ import annotations

import pytest

from tests.factories import request
from ttftsim.engine.cohort import DecodeCohort
from ttftsim.engine.decode_run import SHORT_RUN_STEPS, blocks_cover, run_times
from ttftsim.engine.state import RequestState
from ttftsim.perf.linear import LinearStepModel


def _cohort(*computed: int) -> DecodeCohort:
    """Members decoding with these KV tokens already computed (16-token blocks), long outputs."""
    cohort = DecodeCohort(16)
    for rid, tokens in enumerate(computed):
        state = RequestState(request(rid, 0.0, tokens, 1000))
        state.num_computed, state.num_output, state.admit_seq = tokens, 1, rid
        cohort.join(state)
    return cohort


def test_blocks_cover_counts_block_boundaries_in_stepping_order() -> None:
    # 15 computed: the step at clock 1 computes token 16, whose successor needs block 2; 14 computed: clock 2
    cohort = _cohort(14, 15)
    assert blocks_cover(cohort, 1, 10) == 2  # iteration 2 takes the one free block; iteration 3 has none
    assert blocks_cover(cohort, 2, 10) == 10  # both boundaries covered, the next ones come at clocks 17, 18
    assert blocks_cover(cohort, 0, 10) == 1  # the first iteration had its blocks when it was scheduled


def test_a_run_ends_with_the_iteration_in_progress_at_the_next_arrival() -> None:
    # two decodes: 10 ms + 2 x 1 ms = 12 ms per iteration; an arrival 50 ms ahead falls in the 5th (48..60 ms)
    times = run_times(LinearStepModel(0.010, 0.001), _cohort(100, 200), 302, 4096, 0.050, None)
    assert times.ends == pytest.approx([0.012, 0.024, 0.036, 0.048, 0.060])
    assert times.durations == pytest.approx([0.012] * 5)


def test_iterations_grow_with_the_kv_read_and_long_runs_match_short_ones() -> None:
    # 1 us per KV token: the first iteration reads 302 tokens, each later one 2 more (one per member)
    cost = LinearStepModel(0.010, 0.001, per_kv_token_s=1e-6)
    long = run_times(cost, _cohort(100, 200), 302, SHORT_RUN_STEPS + 8, None, None)
    assert len(long.durations) == SHORT_RUN_STEPS + 8  # numpy path: no arrival, no block limit
    expected = [0.012 + 1e-6 * (302 + 2 * i) for i in range(SHORT_RUN_STEPS + 8)]
    assert list(long.durations) == pytest.approx(expected, abs=1e-12)
    short = run_times(cost, _cohort(100, 200), 302, SHORT_RUN_STEPS, None, None)  # Python path, same times
    assert short.durations == pytest.approx(expected[:SHORT_RUN_STEPS], abs=1e-12)
    assert list(long.ends)[-1] == pytest.approx(sum(expected), abs=1e-12)


def test_free_blocks_bound_the_run() -> None:
    cohort = _cohort(14, 15)
    times = run_times(LinearStepModel(0.010, 0.001), cohort, 31, 100, None, 1)
    assert len(times.ends) == 2
