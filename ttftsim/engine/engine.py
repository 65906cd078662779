"""The engine loop of one replica as a SimPy process: schedule, run the iteration, apply its results.

A token sampled in an iteration is emitted at the iteration's end (vLLM: first_token_latency =
iteration timestamp - arrival) and reaches the client when the replica's API server (api_server.py) has
processed that step's outputs; a request reaches the engine when the API server has processed it. Under
async scheduling the step that runs next was scheduled when the previous one started, so it admits only
requests the engine had by then (docs/engine-semantics.md 1).

Runs of decode-only iterations with an unchanged batch (every running request decoding, nothing
admitted, no preemption) are computed in closed form: their times come from
one vectorised call (long runs) or the cost model's per-run step function (short ones, where numpy's
call overhead would dominate), block allocations are replayed in the order stepping would make them, and
an arrival during the run cuts it after the iteration in progress. `closed_form_decode=False` steps every
iteration instead; a test checks that both give the same results.

The loop's waits are delays where it can, run by a Driver rather than a SimPy Process (waits.py): a delay that
no other event precedes ends in place, so a replica fed its arrivals runs whole stretches without a SimPy event;
in a cluster every event keeps SimPy's order.

This module is compiled with mypyc at install (ttftsim/_native.py), as are the scheduler, the KV cache
and the cost model; it stays plain typed Python.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Generator, Iterable
from typing import Any, cast

import simpy

from ttftsim.config.resolved_engine import ResolvedEngine
from ttftsim.engine.admission import Admission
from ttftsim.engine.api_server import ApiServer, ApiServerCostsS
from ttftsim.engine.deadlines import ClientDeadlines
from ttftsim.engine.decode_run import DecodeRun, run_times
from ttftsim.engine.feed import ArrivalFeed
from ttftsim.engine.loading import lmcache_tiers
from ttftsim.engine.pipeline import PipelineQueue
from ttftsim.engine.recorder import Recorder
from ttftsim.engine.scheduler import Scheduler
from ttftsim.engine.speculative import DraftAcceptance
from ttftsim.engine.state import RequestState
from ttftsim.engine.step_plan import StepPlan, rejection, run_cap, surely_accepted
from ttftsim.engine.visible import VisibleTokens
from ttftsim.engine.waits import Driver, Wake, clock, due_now, first_of, unschedule, wake_at, wake_first
from ttftsim.kvcache.manager import KVCacheManager
from ttftsim.kvcache.offload import CpuTier, RemoteStores
from ttftsim.kvcache.windowed import WindowedKVCacheManager
from ttftsim.perf.linear import PipelineCostModel, StepCostModel
from ttftsim.workload.request import Request


def _release(waiter: simpy.Event, state: RequestState) -> None:
    """A client's wait for its request ends (unless something ended it already)."""
    if not waiter.triggered:
        waiter.succeed(state)


class Engine:
    """One replica. `submit` hands it a request; `done` callbacks fire when a request ends."""

    def __init__(  # noqa: PLR0913 (what the replica is built from, the cluster's shared remote stores, its loop)
        self,
        env: simpy.Environment,
        cfg: ResolvedEngine,
        perf: StepCostModel,
        num_blocks: int,
        recorder: Recorder,
        replica: int = 0,
        closed_form_decode: bool = True,
        client_timeout_s: float | None = None,
        first_visible_token: int = 1,
        attention_window: int = 0,
        remote_stores: RemoteStores | None = None,
        run_loop: bool = True,
    ) -> None:
        self.env, self.cfg, self.perf, self.recorder, self.replica = env, cfg, perf, recorder, replica
        self.kv = (
            KVCacheManager(num_blocks, cfg.block_size, cfg.kv_cache_mode, cfg.enable_prefix_caching, cfg.max_model_len)
            if cfg.windowed_kv is None
            else WindowedKVCacheManager(cfg.windowed_kv, cfg.block_size, cfg.enable_prefix_caching)
        )
        if cfg.kv_offload_blocks:
            self.kv.tier = CpuTier(cfg.kv_offload_blocks)
        self.kv.lmcache = lmcache_tiers(cfg, remote_stores)  # remote_stores: the cluster's, shared
        self.closed_form_decode = (
            closed_form_decode
            and cfg.windowed_kv is None  # blocks leave the window as requests decode: stepped request by request
            and cfg.kv_cache_mode != "none"
            and cfg.pp == 1
            and cfg.speculative is None
            and not cfg.lora_slots
        )
        spec = cfg.speculative
        self.drafts = DraftAcceptance(spec.acceptance, cfg.seed, replica) if spec is not None else None
        self.scheduler = Scheduler(cfg, self.kv, self.closed_form_decode, attention_window)
        self.num_blocks = num_blocks
        self._accepted_tokens = surely_accepted(cfg, num_blocks)  # requests up to this long need no `rejection`
        self._paged = cfg.kv_cache_mode == "paged"  # read every iteration: a native copy of the configuration's
        self._async = cfg.async_scheduling
        self._wakeup = env.event()
        self._run: DecodeRun | None = None  # the closed-form decode run in flight
        self.feed = ArrivalFeed()  # open-loop arrivals the engine pulls itself
        self.client_timeout_s = client_timeout_s
        if client_timeout_s is not None:
            recorder.client_timeout_s = client_timeout_s
        self.deadlines = ClientDeadlines()  # when each client gives up (its request sent client_timeout_s ago)
        self.accepts_pushes = True  # False once arrivals are pulled from an attached feed
        self.visible = VisibleTokens(first_visible_token)  # the client sees content with this token
        self.last_start_s = -1.0  # start of the iteration in flight or just ended; -1 when idle
        # when the engine found it could schedule nothing though requests waited, none running or loading (none
        # will free blocks: a stall); None while it makes progress
        self.stalled_at_s: float | None = None
        latencies = {"hop_latency_s", "server_ttft_extra_s"}  # fixed delays, not the loop's CPU work
        self.api = ApiServer(ApiServerCostsS(**cfg.api_server.model_dump(exclude=latencies)))
        self._api_on = not self.api.costs.is_free
        self.admission = Admission(cfg.max_num_queued_reqs, cfg.max_num_queued_tokens)  # HTTP 503 (admission.py)
        self._admitting = self.admission.active
        self.on_end: Callable[[RequestState, str], None] | None = None  # cluster: a request left this engine
        self.on_first_token: Callable[[RequestState], None] | None = None  # cluster: the TTFT histogram
        # a data-parallel rank of an MoE model is stepped by its group (data_parallel.py), not by a loop of its own
        self.driver: Driver | None = Driver(env, self._loop_body()) if run_loop else None

    # ---- requests in and out ----

    def submit(self, req: Request, waiter: simpy.Event | None = None, pulled: bool = False) -> RequestState:
        """A request reaches this engine now (or, pulled from the feed, at its arrival time)."""
        state = RequestState(req)
        state.waiter = waiter
        sent = req.arrival_s if pulled else clock(self.env)
        state.submitted_s = sent
        if self._admitting and (refused := self.admission.refusal()):  # before the API server tokenizes it
            state.status, state.rejected_reason = "rejected", refused
            self._end(state, "rejected")
            return state
        if self._api_on:  # the engine core has it once the API server's queue reaches it
            self._account_run(sent)
            state.submitted_s = self.api.ingress(sent, req.prompt_tokens)
            state.ingress_s = state.submitted_s - sent
        fits = req.prompt_tokens + req.output_tokens <= self._accepted_tokens
        reason = "" if fits else rejection(self.cfg, self.num_blocks, req)
        if reason:
            state.status, state.rejected_reason = "rejected", reason
            self._end(state, "rejected")
            return state
        if self._admitting:
            self.admission.accepted(req.prompt_tokens)
        if req.private:
            self.kv.mark_private(req.request_id)
        state.is_anonymous_kv = self.kv.is_anonymous(req.request_id)
        if self.client_timeout_s is not None:
            self.deadlines.add(req.arrival_s + self.client_timeout_s, state)
        self.scheduler.add(state)
        if not self._wakeup.triggered:
            self._wakeup.succeed()
        return state

    def attach_feed(self, requests: Iterable[Request]) -> None:
        """Known future arrivals (open loop): the engine admits each at its arrival time itself, so a
        decode run is cut at the next arrival without a wake-up event. Same results as submitting them.
        They are read a chunk at a time (feed.py); a second feed follows the first."""
        self.feed.attach(requests)
        self.accepts_pushes = False

    def pull_arrivals(self) -> None:
        queue, now = self.feed.queue, clock(self.env)
        while queue and queue[0].arrival_s <= now:
            self.submit(self.feed.pop(), pulled=True)

    def _next_arrival_in(self) -> float | None:
        """Time until the engine must look up: the next pulled arrival, a request leaving the API server, a KV
        copy from the CPU tier done, or a timeout check."""
        now, scheduler = clock(self.env), self.scheduler
        arrival = self.feed.next_arrival_s()
        gaps = [] if arrival is None else [arrival - now]
        head = scheduler.next_submitted_s()  # the API server's next hand-off
        if head is not None and head > now:
            gaps.append(head - now)
        load = scheduler.loading.next_done_s() if scheduler.loading.states else None
        if load is not None and load > now:  # apart from the head: a request the engine has may wait behind it
            gaps.append(load - now)
        expiry = self.deadlines.next_s
        if expiry < math.inf and scheduler.has_work():
            gaps.append(max(0.0, expiry - now))
        return min(gaps) if gaps else None

    def expire_clients(self) -> None:
        """Abort requests whose client gave up (sent client_timeout_s ago or more), freeing their KV: at the first
        schedule at or after the earliest deadline (vLLM handles a client's abort between steps; an iteration in
        progress ends first, and a decode run is cut at the deadline as at an arrival)."""
        now, timeout = clock(self.env), self.client_timeout_s
        if timeout is None or now < self.deadlines.next_s:
            return
        for state in self.scheduler.expire(now, timeout):
            state.status, state.rejected_reason = "aborted", f"client timeout after {timeout:g} s"
            self._end(state, "aborted")
        self.deadlines.drop_ended()

    def _end(self, state: RequestState, status: str) -> None:
        if self._admitting and status != "rejected":  # a rejected request was never counted
            self.admission.ended(state.req.prompt_tokens, state.first_token_s >= 0)
        self.recorder.request(state, self.replica, status)
        if self.on_end is not None:
            self.on_end(state, status)
        waiter = state.waiter
        if isinstance(waiter, simpy.Event) and not waiter.triggered:
            # the client reads the end as late as the recorder's e2e says: the API server's delay in sending
            # the tokens and the fixed latency after it (hand-offs, frontend_overhead_s)
            delay = state.output_delay_s + self.recorder.client_latency_s
            if delay > 0:
                callbacks = self.env.timeout(delay).callbacks
                assert callbacks is not None
                callbacks.append(lambda _event: _release(waiter, state))
            else:
                waiter.succeed(state)

    @property
    def num_running(self) -> int:
        return self.scheduler.num_running

    @property
    def num_waiting(self) -> int:
        return self.scheduler.num_waiting

    def in_flight(self) -> list[RequestState]:
        """Requests not yet ended (counters made exact), running first."""
        self.settle()
        return self.scheduler.in_flight()

    def fail_all(self) -> list[RequestState]:
        """The replica dies: stop its loop and hand back every request not yet ended (nothing recorded;
        the caller retries or records them)."""
        if self.driver is not None:
            self.driver.stop()
        self._run = None
        self.feed.clear()
        return self.scheduler.drain()

    # ---- the loop ----

    def _loop_body(self) -> Generator[Any, Any, None]:
        """What the replica's driver runs (Driver): the plain loop, or the pipeline's with PP > 1."""
        return self._pipeline_loop() if self.cfg.pp > 1 else self._body()

    def _body(self) -> Generator[float | simpy.Event | Wake, Any, None]:
        """Schedule, run, apply; each wait a delay in seconds or an event."""
        while True:
            self.pull_arrivals()
            self.expire_clients()
            plan = self.schedule_next() if self.scheduler.has_work() else None
            if plan is None or plan.is_empty:
                self.last_start_s = -1.0  # idle: the next arrival is scheduled at once
                if self.stalled_at_s is None and plan is not None and self.is_stuck():
                    self.stalled_at_s = clock(self.env)
                yield self.idle_wait()
                continue
            self.stalled_at_s = None
            sched = self.scheduler
            run = run_cap(plan, sched.cohort, sched.deferred or sched.head_refused, self.closed_form_decode)
            if run > 1:
                yield from self._decode_run(plan, run)
            else:
                yield from self._step(plan)
            if self.accepts_pushes and due_now(self.env):
                # requests pushed at this very instant are seen by the next schedule: wait for the events
                # already due now (when none is, nothing can push before the next schedule, so no wait)
                yield 0.0  # (a zero delay: the driver schedules it as SimPy's timeout(0) would be)

    def is_stuck(self) -> bool:
        """Nothing was scheduled though the head of the queue has reached the engine, and nothing runs or loads
        that could free blocks for it (vLLM's scheduler also stops at the first waiting request it cannot
        allocate; a request copied back from the CPU tier waits holding its blocks: vllm-project/vllm issue
        45388; from 0.23 new loads are held back, Scheduler.inflight_reservation, but a head holding no blocks can
        still stand in front of loads that hold them). Only a client timeout can end it."""
        sched = self.scheduler
        head = sched.next_submitted_s()
        return head is not None and head <= clock(self.env) and not sched.running and not sched.loading.states

    def idle_wait(self) -> float | simpy.Event:
        """What an idle engine waits for: a pushed request (its wake-up event), or the next pulled arrival, API-server
        hand-off, KV copy from the CPU tier or timeout check, whichever comes first (without pushes: that delay)."""
        env = self.env
        self._wakeup = env.event()
        gap = self._next_arrival_in()
        if gap is None:
            return self._wakeup
        if not self.accepts_pushes:
            return gap
        return first_of(env, env.timeout(gap), self._wakeup)

    def idle_until(self) -> simpy.Event:
        """idle_wait as an event (the data-parallel group waits for any of its ranks')."""
        wait = self.idle_wait()
        return wait if isinstance(wait, simpy.Event) else self.env.timeout(wait)

    def schedule_next(self) -> StepPlan:
        """The next iteration. Under async scheduling (vLLM v1/engine/core.py step_with_batch_queue, two
        batches in flight) the step that runs next was scheduled when the one that just ended started, so
        only requests the engine had by then are admitted; when that step would be empty the engine was
        about to go idle, and the new arrivals are scheduled now."""
        now, sched = clock(self.env), self.scheduler
        if self._async and 0.0 <= self.last_start_s < now:
            plan = sched.schedule(now, self.last_start_s)
            if not plan.is_empty:
                return plan
        return sched.schedule(now)

    def _step(self, plan: StepPlan) -> Generator[float | simpy.Event | Wake, Any, None]:
        from_idle = self.last_start_s < 0  # no step in flight to hide this one's host time under
        start = self.last_start_s = clock(self.env)
        duration = self.perf.idle_start_s(plan.shape) if from_idle else self.perf.time_s(plan.shape)
        duration += plan.shape.lora_load_s  # adapters copied into GPU slots before the forward pass (lora.py)
        duration = self.kv.with_transfers(duration)  # LMCache's chunk loads and stores (loading.py)
        yield duration
        self.complete(plan, start, duration)

    def _pipeline_loop(self) -> Generator[float | simpy.Event | Wake, Any, None]:
        """Pipeline parallelism (pipeline.py): fill the batch queue while the scheduler finds work, else
        wait for the oldest batch and apply it; idle as the plain loop when nothing is in flight."""
        queue = PipelineQueue(self.cfg.pp, cast(PipelineCostModel, self.perf))  # measured costs refused with PP
        while True:
            self.pull_arrivals()
            self.expire_clients()
            now = clock(self.env)
            room = queue.has_room() and self.scheduler.has_work()
            plan = self.scheduler.schedule(now) if room else None
            if plan is not None and not plan.is_empty:
                self.stalled_at_s = None
                queue.start(plan, now)
                continue
            if queue.batches:
                yield max(0.0, queue.batches[0].end_s - now)
                kept, start, duration = queue.finish_oldest()
                self.complete(kept, start, duration)
                continue
            if plan is not None and self.stalled_at_s is None and self.is_stuck():
                self.stalled_at_s = now  # nothing in flight, nothing scheduled: as the plain loop
            yield self.idle_wait()

    def complete(self, plan: StepPlan, start: float, duration: float) -> None:
        """Apply an iteration that ended now: the API server's delay for its tokens, the step record, the
        cohort's and each scheduled request's progress."""
        delay, now = 0.0, clock(self.env)
        if self._api_on:  # arrivals during the step reach the API server before the step's tokens
            self.pull_arrivals()
            delay = self.api.outputs(now, plan.shape.num_sampled) - now
        self._record_step(start, duration, plan.shape.num_tokens, 1)
        for state in plan.preempted:
            if state.first_preempt_s < 0:
                state.first_preempt_s = start
        if not plan.per_request and self.scheduler.cohort.size:
            self.recorder.itl(duration, self.scheduler.cohort.size)
            if self.visible.awaiting:
                self.visible.mark(self.scheduler.cohort, (now,), (delay,))
            self._advance_cohort(1)
        for state, new in plan.scheduled:
            self._apply(state, new, duration, delay)
        if plan.per_request:
            self.scheduler.rebuild_cohort()

    def _apply(self, state: RequestState, new: int, duration: float, delay: float) -> None:
        """One request's share of a finished iteration (outside the cohort)."""
        state.num_computed += new
        if state.first_token_s < 0:
            state.prefill_s += duration
        total = state.num_tokens
        if state.num_computed < total:
            return
        self._emit_token(state, duration, delay)
        if state.num_computed > total:  # drafts verified: the accepted ones arrive with the target's token
            assert self.drafts is not None
            more = min(self.drafts.accepted(state.num_computed - total), state.req.output_tokens - state.num_output)
            for _ in range(more):  # one inter-token latency per step (vLLM's stats)
                self._emit_token(state, -1.0, delay)
            state.num_computed = state.num_tokens - 1  # the KV of the accepted drafts stays, the rest is rewritten
        if self.scheduler.recompute_all:
            state.num_computed = 0
        if state.num_output >= state.req.output_tokens:
            self._finish(state)
        elif state.is_decoding:
            self.scheduler.to_cohort(state)

    def _emit_token(self, state: RequestState, duration: float, delay: float) -> None:
        """A token sampled at the end of this iteration (the first, or one more of a stepping request);
        the API server sends it `delay` later."""
        end = clock(self.env)
        if state.num_output == 0:
            state.first_token_s = end
            if self._admitting:
                self.admission.first_token(state.req.prompt_tokens)
            if self.on_first_token is not None:
                self.on_first_token(state)
        elif duration >= 0:
            self.recorder.itl(duration)
        state.num_output += 1
        self.visible.emitted(state, end, delay)

    def _advance_cohort(self, steps: int) -> None:
        cohort = self.scheduler.cohort
        if cohort.size:
            cohort.advance(steps)
            for state in cohort.pop_finished():
                self._finish(state)

    def _finish(self, state: RequestState) -> None:
        self.scheduler.finish(state)
        state.status = "finished"
        state.finish_s = clock(self.env)
        if state.visible_s < 0:  # fewer tokens than the first visible one: the client sees the end
            state.visible_s = state.finish_s
        self._end(state, "finished")

    # ---- closed-form decode runs ----

    def _decode_run(self, plan: StepPlan, steps: int) -> Generator[float | simpy.Event | Wake, Any, None]:
        """Up to `steps` decode-only iterations in one wait; an arrival cuts the run after the
        iteration in progress."""
        env, start = self.env, clock(self.env)
        free = self.kv.pool.num_free if self._paged else None
        cohort = self.scheduler.cohort
        times = run_times(self.perf, cohort, plan.shape.decode_kv_tokens, steps, self._next_arrival_in(), free)
        ends = times.ends
        run = self._run = DecodeRun(start, times, self._api_on and bool(self.visible.awaiting))
        done = len(ends)
        if self.accepts_pushes:  # a pushed request may cut the run
            self._wakeup = env.event()
            timer = wake_at(env, start + float(ends[-1]))  # start: the clock now
            yield wake_first(env, timer, self._wakeup)
            if timer.callbacks is not None:  # cut: finish the iteration in progress
                unschedule(env, timer)
                elapsed = clock(env) - start
                done = bisect.bisect_right(ends, elapsed)
                if done == 0 or ends[done - 1] < elapsed:
                    yield float(ends[done]) - elapsed
                    done += 1
        else:  # pulled arrivals already bounded the run: a plain delay (no condition event) is enough
            yield float(ends[-1])
        if self._api_on:  # arrivals in the last iteration reach the API server before its tokens
            self.pull_arrivals()
        self._run = None
        self._apply_run(run, done)

    def _apply_run(self, run: DecodeRun, done: int) -> None:
        """The first `done` iterations of a decode run: blocks in stepping order, then tokens."""
        cohort, start, ends = self.scheduler.cohort, run.start_s, run.times.ends
        self.last_start_s = start + (float(ends[done - 2]) if done > 1 else 0.0)
        self._record_step(start, float(ends[done - 1]), cohort.size * done, done)
        if self._paged and self.scheduler.registers_decodes:  # a CPU tier's stores, in stepping order
            for step in range(2, done + 1):
                self.kv.append_blocks([member.rid for member in cohort.due(cohort.clock + step - 1)])
                self.scheduler.register_fills(cohort.clock + step - 1)
        elif self._paged and cohort.num_identified:  # the iterations' blocks in one call: the same allocations, in turn
            due = [member.rid for step in range(2, done + 1) for member in cohort.due(cohort.clock + step - 1)]
            self.kv.append_blocks(due)
        elif self._paged and done > 1:  # every member's blocks anonymous: only how many each takes matters
            self.kv.append_anonymous(cohort.crossings(cohort.clock + 1, cohort.clock + done - 1))
        self.recorder.itl_run(run.times.durations[:done], cohort.size)
        if self._api_on:
            run.hand_tokens(self.api, done, cohort.size)
        if self.visible.awaiting:  # the API server's delay for each iteration's tokens (queued behind earlier work)
            step_ends = [start + float(end) for end in ends[:done]]
            delivered = run.delivered
            # delivered may run past `done` (the settle at the horizon hands an iteration ending there)
            delays = [0.0] * done if delivered is None else [d - e for d, e in zip(delivered, step_ends, strict=False)]
            self.visible.mark(cohort, step_ends, delays)
        self._advance_cohort(done)

    def _account_run(self, until: float) -> None:
        """Hand the API server the tokens of the decode run's iterations that ended by `until`."""
        run = self._run
        if run is not None:
            run.hand_tokens(
                self.api, bisect.bisect_right(run.times.ends, until - run.start_s), self.scheduler.cohort.size
            )

    def settle(self) -> None:
        """At the horizon: take in requests that have arrived, and apply the iterations of an unfinished
        decode run that have already ended (an
        iteration ending exactly at the horizon has not, as with stepping); the one in progress has its
        blocks, as a stepped iteration gets them when scheduled."""
        queue = self.feed.queue
        while queue and queue[0].arrival_s < clock(self.env):  # arrived, not yet pulled by the busy engine
            self.submit(self.feed.pop(), pulled=True)
        run = self._run
        if run is None:
            return
        self._run = None
        done = bisect.bisect_left(run.times.ends, clock(self.env) - run.start_s)
        if done:
            self._apply_run(run, done)
        if 0 < done < len(run.times.ends) and self._paged:  # step 1 got its blocks when scheduled
            cohort = self.scheduler.cohort
            self.kv.append_blocks([member.rid for member in cohort.due(cohort.clock)])
            if self.scheduler.registers_decodes:
                self.scheduler.register_fills(cohort.clock)

    def _record_step(self, start: float, duration: float, tokens: int, steps: int) -> None:
        """One row of the iteration log: when, how long, tokens, the gauges after it, and how many iterations
        it stands for (a closed-form decode run is one row)."""
        sched = self.scheduler
        self.recorder.step(
            start, duration, self.replica, tokens, sched.num_running, sched.num_waiting, self.kv.usage(), steps
        )
