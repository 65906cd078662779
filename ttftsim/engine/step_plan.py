"""What the scheduler hands the engine for one iteration (StepPlan), how many identical decode-only
iterations follow from it (run_cap), and what a replica refuses before any scheduling (rejection).

Compiled with mypyc at install (ttftsim/_native.py), as the scheduler and engine that use it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.config.engine import ResolvedEngine
from ttftsim.engine.cohort import DecodeCohort
from ttftsim.engine.decode_run import MAX_RUN_STEPS
from ttftsim.engine.state import RequestState
from ttftsim.perf.batch import BatchShape
from ttftsim.workload.request import Request


@dataclass(frozen=True, slots=True)
class StepPlan:
    """What runs in one iteration: (request, new tokens) pairs outside the cohort, whether the decode
    cohort steps too, who was preempted, and the cost shape."""

    scheduled: tuple[tuple[RequestState, int], ...]
    preempted: tuple[RequestState, ...]
    shape: BatchShape
    cohort_steps: bool = False
    per_request: bool = True  # scheduled by the reference loop (the cohort was dissolved)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled and not self.cohort_steps


def run_cap(plan: StepPlan, cohort: DecodeCohort, deferred: bool, closed_form: bool) -> int:
    """At most how many identical decode-only iterations follow from this plan (1 = just step; also when a
    waiting request becomes visible at the next schedule (`deferred`), or when the reference path steps
    every iteration)."""
    if plan.per_request or plan.scheduled or plan.preempted or deferred or not closed_form:
        return 1
    return min(MAX_RUN_STEPS, cohort.steps_to_next_finish())


def rejection(cfg: ResolvedEngine, num_blocks: int, req: Request) -> str:
    """Why a replica refuses a request outright ('' when it does not): longer than max_model_len, or more
    KV than the whole cache (paged; with sliding-window groups, the blocks it holds at most when alone: the
    window and one step's chunk in the windowed groups), or a static reservation larger than the cache."""
    total = req.prompt_tokens + req.output_tokens
    if total > cfg.max_model_len:
        return (
            f"prompt {req.prompt_tokens} + output {req.output_tokens} tokens exceed max_model_len {cfg.max_model_len}"
        )
    size = cfg.block_size
    windowed = cfg.windowed_kv
    if cfg.kv_cache_mode == "paged" and windowed is not None:  # alone: every full group, the window in the rest
        blocks = -(-total // size)
        window = -(-(windowed.window - 1 + cfg.max_num_batched_tokens) // size) + 1
        peak = windowed.full * blocks + windowed.windowed * min(blocks, window)
        if peak > windowed.num_blocks:
            return f"{total} tokens need {peak} KV blocks over the KV-cache groups, more than the {windowed.num_blocks}"
    elif cfg.kv_cache_mode == "paged" and -(-total // size) > num_blocks:
        return f"{total} tokens exceed the KV cache ({num_blocks} blocks of {size})"
    if cfg.kv_cache_mode == "static" and -(-cfg.max_model_len // size) > num_blocks:
        return (
            f"a static reservation of max_model_len {cfg.max_model_len} tokens exceeds the KV cache "
            f"({num_blocks} blocks of {size})"
        )
    return ""
