"""Pipeline parallelism's batch queue: which stage a batch occupies when (engine.py runs the batches).

vLLM's engine core with PP > 1 keeps up to PP batches in flight (v1/engine/core.py step_with_batch_queue,
batch_queue_size = the executor's max_concurrent_batches = pipeline_parallel_size): it schedules a new batch
whenever the queue has room and the scheduler finds tokens to run (a request whose token is still in flight
has none: v1/core/sched/scheduler.py skips it; a prefill's next chunk can go in the next batch, since
num_computed_tokens advances when a chunk is scheduled), and otherwise blocks until the oldest batch returns,
taking in new requests only after that. Each batch runs through the stages in order; a stage works on one
batch at a time, so batch k+1 starts on stage 0 when batch k leaves it and on stage j when both its stage j-1
work (plus the send between them) and batch k's stage j work are done (a flow shop).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ttftsim.engine.step_plan import StepPlan
from ttftsim.perf.linear import PipelineCostModel


@dataclass(frozen=True, slots=True)
class PipelineBatch:
    """A batch in flight: its plan, when it entered stage 0 and when it leaves the last stage, and each
    scheduled request's preemption count when it was scheduled (a request preempted since gets nothing)."""

    plan: StepPlan
    start_s: float
    end_s: float
    preemptions: tuple[int, ...]


class StageClock:
    """When each stage is next free. Invariant: free times never decrease."""

    def __init__(self, stages: int) -> None:
        self.free_s = [0.0] * stages

    def run(self, now: float, stage_s: list[float], transfer_s: list[float]) -> tuple[float, float]:
        """A batch handed to the pipeline at `now`: (its start on stage 0, its end on the last stage), with
        every stage booked until the batch leaves it."""
        free = self.free_s
        start = max(now, free[0])
        end = start + stage_s[0]
        free[0] = end
        for stage in range(1, len(free)):
            begin = max(end + transfer_s[stage - 1], free[stage])
            end = begin + stage_s[stage]
            free[stage] = end
        return start, end


class PipelineQueue:
    """The batches in flight, oldest first, at most `depth` of them, on the stages' clock."""

    def __init__(self, depth: int, model: PipelineCostModel) -> None:
        self.depth, self.model = depth, model
        self.clock = StageClock(depth)
        self.batches: deque[PipelineBatch] = deque()

    def has_room(self) -> bool:
        return len(self.batches) < self.depth

    def start(self, plan: StepPlan, now: float) -> None:
        """A scheduled batch enters the pipeline: its tokens are in flight until it comes back."""
        stages = self.model.stage_times(plan.shape, hidden_host=bool(self.batches))
        start, end = self.clock.run(now, stages, self.model.transfer_times(plan.shape))
        for state, new in plan.scheduled:
            state.num_inflight += new
        preemptions = tuple(state.num_preemptions for state, _ in plan.scheduled)
        self.batches.append(PipelineBatch(plan, start, end, preemptions))

    def finish_oldest(self) -> tuple[StepPlan, float, float]:
        """The oldest batch is back: its plan without the requests preempted or ended since it was
        scheduled (their tokens go to nobody), its start and its duration."""
        oldest = self.batches.popleft()
        kept = []
        for (state, new), count in zip(oldest.plan.scheduled, oldest.preemptions, strict=True):
            if state.num_preemptions == count and state.status == "running":
                state.num_inflight -= new
                kept.append((state, new))
        plan = StepPlan(tuple(kept), oldest.plan.preempted, oldest.plan.shape)
        return plan, oldest.start_s, oldest.end_s - oldest.start_s
