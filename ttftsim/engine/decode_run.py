"""Closed-form runs of decode-only iterations: how many can run in one wait, and when each ends.

A run is a stretch of iterations with an unchanged batch (every running request decoding, nothing
admitted, no preemption). It is at most as long as the free KV blocks cover (decodes crossing a block
boundary take one each, in the cohort's stepping order) and ends with the iteration in progress when
the next request arrives. Iterations only get longer in a run (the KV read grows), so the first bounds
how many fit before an arrival. Short runs are timed step by step in Python (numpy's per-call overhead
would dominate), long ones as arrays.

Compiled with mypyc at install (ttftsim/_native.py), as the engine that calls it.
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from ttftsim.engine.api_server import ApiServer
from ttftsim.engine.cohort import DecodeCohort
from ttftsim.perf.linear import StepCostModel

MAX_RUN_STEPS = 4096
SHORT_RUN_STEPS = 32  # decode runs up to this long are computed in Python, longer ones with numpy


class RunTimes:
    """A run's iterations: `ends[i]` is when iteration i ends, in seconds after the run starts (a list for
    short runs, an array for long ones); `durations[i]` its length. Immutable (Final attributes); a plain
    class, compiled (see BatchShape)."""

    def __init__(self, ends: Any, durations: Any) -> None:
        self.ends: Final = ends
        self.durations: Final = durations


class DecodeRun:
    """A run in flight: when it started, its iterations' times, and how many of them have had their tokens
    handed to the API server (the rest are handed when the run ends, or when a request arrives); with
    `track`, when the API server has processed each handed iteration's tokens (`delivered`: a member's
    first visible token may come inside the run, and waits for them)."""

    def __init__(self, start_s: float, times: RunTimes, track: bool = False) -> None:
        self.start_s = start_s
        self.times = times
        self.handed = 0
        self.delivered: list[float] | None = [] if track else None

    def hand_tokens(self, api: ApiServer, done: int, num_seqs: int) -> None:
        """The API server gets the tokens of the first `done` iterations not handed to it yet."""
        first = self.handed
        if done > first:
            times = self.times
            api.output_run(self.start_s, times.ends[first:done], times.durations[first:done], num_seqs, self.delivered)
            self.handed = done


def blocks_cover(cohort: DecodeCohort, free_blocks: int, steps: int) -> int:
    """How many of `steps` decode iterations the free blocks cover (the first has its blocks already)."""
    for step in range(2, steps + 1):
        free_blocks -= cohort.due_count(cohort.clock + step - 1)
        if free_blocks < 0:
            return step - 1
    return steps


def run_times(
    perf: StepCostModel,
    cohort: DecodeCohort,
    kv_tokens: int,
    steps: int,
    gap_s: float | None,
    free_blocks: int | None,
) -> RunTimes:
    """The run's iterations: at most `steps`, as many as `free_blocks` cover (None: no block limit), up to
    the one in progress `gap_s` from now (None: no arrival ahead)."""
    size = cohort.size
    step_s = perf.decode_step_s(size)
    first = step_s(kv_tokens)
    if gap_s is not None:
        steps = min(steps, math.ceil(gap_s / first) + 1)
    if free_blocks is not None:
        steps = blocks_cover(cohort, free_blocks, steps)
    if steps > SHORT_RUN_STEPS:
        durations = perf.decode_run_s(size, kv_tokens, steps)
        ends = np.add.accumulate(durations)  # np.cumsum's sums without its Python wrapper (1 us a call)
        cut = steps if gap_s is None else int(ends.searchsorted(gap_s, side="left")) + 1
        return RunTimes(ends[:cut], durations[:cut])
    times, end_times, end, limit = [first], [first], first, math.inf if gap_s is None else gap_s
    while end < limit and len(end_times) < steps:
        kv_tokens += size
        duration = step_s(kv_tokens)
        end += duration
        times.append(duration)
        end_times.append(end)
    return RunTimes(end_times, times)
