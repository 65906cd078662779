"""What the scheduler hands the engine for one iteration (StepPlan), how many identical decode-only
iterations follow from it (run_cap), and what a replica refuses before any scheduling (rejection).

Compiled with mypyc at install (ttftsim/_native.py), as the scheduler and engine that use it.
"""

from __future__ import annotations

from typing import Final

from ttftsim.config.resolved_engine import ResolvedEngine, WindowedGroups
from ttftsim.engine.cohort import DecodeCohort
from ttftsim.engine.decode_run import MAX_RUN_STEPS
from ttftsim.engine.state import RequestState
from ttftsim.perf.batch import BatchShape
from ttftsim.workload.request import Request


class StepPlan:
    """What runs in one iteration: (request, new tokens) pairs outside the cohort, whether the decode
    cohort steps too, who was preempted, and the cost shape. Immutable (Final attributes); a plain class
    built once per iteration, compiled (see BatchShape)."""

    def __init__(
        self,
        scheduled: tuple[tuple[RequestState, int], ...],
        preempted: tuple[RequestState, ...],
        shape: BatchShape,
        cohort_steps: bool = False,
        per_request: bool = True,
    ) -> None:
        self.scheduled: Final = scheduled
        self.preempted: Final = preempted
        self.shape: Final = shape
        self.cohort_steps: Final = cohort_steps
        self.per_request: Final = per_request  # scheduled by the reference loop (the cohort was dissolved)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled and not self.cohort_steps


def run_cap(plan: StepPlan, cohort: DecodeCohort, deferred: bool, closed_form: bool) -> int:
    """At most how many identical decode-only iterations follow from this plan (1 = just step; also when a
    waiting request becomes visible at the next schedule or its admission may change before it (`deferred`: the
    scheduler's deferred or head_refused), or when the reference path steps every iteration)."""
    if plan.per_request or plan.scheduled or plan.preempted or deferred or not closed_form:
        return 1
    return min(MAX_RUN_STEPS, cohort.steps_to_next_finish())


def rejection(cfg: ResolvedEngine, num_blocks: int, req: Request) -> str:
    """Why a replica refuses a request outright ('' when it does not): longer than max_model_len, or more
    KV than the whole cache (paged; with sliding-window groups, the most blocks it holds when alone:
    windowed_peak_blocks), or a static reservation larger than the cache. vLLM has no such check at run time
    (its start-up check guarantees one max_model_len sequence); a request that could never be allocated
    would hold the head of the queue for ever, so it is refused here."""
    total = req.prompt_tokens + req.output_tokens
    if total > cfg.max_model_len:
        return (
            f"prompt {req.prompt_tokens} + output {req.output_tokens} tokens exceed max_model_len {cfg.max_model_len}"
        )
    size = cfg.block_size
    windowed = cfg.windowed_kv
    if cfg.kv_cache_mode == "paged" and windowed is not None:
        peak = windowed_peak_blocks(cfg, windowed, req.prompt_tokens, req.output_tokens)
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


def surely_accepted(cfg: ResolvedEngine, num_blocks: int) -> int:
    """The most tokens (prompt + output) of a request that `rejection` accepts whatever its other numbers (-1
    when that depends on more than the total: sliding-window groups, or a static reservation refused for every
    request), so that a replica checks only the rare request above it."""
    if cfg.windowed_kv is not None and cfg.kv_cache_mode == "paged":
        return -1
    if cfg.kv_cache_mode == "static" and -(-cfg.max_model_len // cfg.block_size) > num_blocks:
        return -1
    if cfg.kv_cache_mode == "paged":
        return min(cfg.max_model_len, num_blocks * cfg.block_size)  # cdiv(total, size) <= blocks
    return cfg.max_model_len


def windowed_peak_blocks(cfg: ResolvedEngine, groups: WindowedGroups, prompt: int, output: int) -> int:
    """The most blocks a request holds over all groups when it runs alone: each step frees what left the window
    of the c tokens computed before it, then holds cdiv(c + n, block) blocks in a full group and that less the
    (c - window + 1) // block skipped ones in a windowed group (windowed.py). Its prefill chunks (the token
    budget, or the whole prompt without chunked prefill) are walked one by one; of its decode steps (n = 1,
    c = prompt .. prompt + output - 2) only the last block_size ones and the last before the window fills:
    past the window the windowed count repeats every block_size tokens while the full count only grows, and
    before it both only grow. With the full-prompt reserve (vLLM 0.32+), admission needs the whole prompt in
    every group at once."""
    size, window = cfg.block_size, groups.window

    def held(computed: int, new: int) -> int:
        blocks = -(-(computed + new) // size)
        skipped = max(0, computed - window + 1) // size
        return groups.full * blocks + groups.windowed * (blocks - skipped)

    chunk = cfg.max_num_batched_tokens if cfg.enable_chunked_prefill else prompt
    if cfg.enable_chunked_prefill and cfg.long_prefill_token_threshold:
        chunk = min(chunk, cfg.long_prefill_token_threshold)
    peak = (groups.full + groups.windowed) * -(-prompt // size) if cfg.reserve_full_prompt else 0
    computed = 0
    while computed < prompt:
        new = min(prompt - computed, chunk)
        peak = max(peak, held(computed, new))
        computed += new
    last = prompt + output - 2  # the last decode step computes this token
    steps = set(range(max(prompt, last - size + 1), last + 1))
    if prompt <= window - 2 <= last:
        steps.add(window - 2)
    return max([peak, *(held(c, 1) for c in steps)])
