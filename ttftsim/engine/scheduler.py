"""One scheduling step with vLLM V1 semantics (serving-semantics.md 3.2).

Core rule: running requests first, in order, each taking min(remaining, budget) tokens (1 for a decode,
a chunk for a partial prefill); when KV blocks run out the policy's victim is preempted by recompute
(blocks freed, progress reset, back to the front of the waiting queue); waiting requests are admitted,
after a prefix-cache lookup, only if nothing was preempted this step, while fewer than max_num_seqs run
and budget remains; the first one that does not fit stops admission (head-of-line, FCFS). A request the
engine has not seen yet at the admission cutoff (still in the API server, or arrived after the step was
scheduled under async scheduling) stops admission too. Full blocks are registered in the prefix cache
when they are allocated (vLLM kv_cache_manager.allocate_slots -> cache_blocks), so a request admitted
later in the same step hits blocks that this step is still computing.

Speed: decoding requests live in a DecodeCohort. When every running request gets its full ask within
the budget and the free blocks cover every allocation, the outcome of the running loop is known without
visiting each request: only prefilling requests and cohort members crossing a block boundary are
touched, in running order. Otherwise the cohort is dissolved and the loop runs request by request.
"""

from __future__ import annotations

from ttftsim.config.resolved_engine import ResolvedEngine
from ttftsim.engine.cohort import DecodeCohort
from ttftsim.engine.loading import LoadingRequests, admission_start
from ttftsim.engine.lora import LoraSlots
from ttftsim.engine.preemption import PreemptionPolicy, make_preemption
from ttftsim.engine.queues import WaitingQueue, make_queue, pop_all
from ttftsim.engine.state import RequestState
from ttftsim.engine.step_plan import StepPlan
from ttftsim.kvcache.manager import KVCacheManager
from ttftsim.perf.batch import BatchShapeBuilder


class Scheduler:
    """Owns the request state: the running list, the waiting queue and the decode cohort; asks the KV
    manager for blocks. Nobody else edits them: requests come in through `add`, leave through `finish`,
    `expire` and `drain`; gauges and `in_flight` read them."""

    def __init__(
        self, engine: ResolvedEngine, kv: KVCacheManager, use_cohort: bool = True, attention_window: int = 0
    ) -> None:
        self.cfg = engine
        # the limits read on every schedule, as native attributes: the configuration is a Python dataclass, and
        # each attribute read from it is a dictionary lookup
        self._budget = engine.max_num_batched_tokens
        self._max_num_seqs = engine.max_num_seqs
        self._chunked = engine.enable_chunked_prefill
        self._long_prefill = engine.long_prefill_token_threshold
        self._lora_slots = engine.lora_slots
        self._reserve_inflight = engine.reserve_for_inflight_prefills
        self._reserve_prompt = engine.reserve_full_prompt
        self._load_s_per_block = engine.kv_load_s_per_block
        self.attention_window = attention_window  # the model's sliding window: each step's windowed sums, exact
        self.kv = kv
        self.running: list[RequestState] = []
        self.waiting: WaitingQueue = make_queue(engine.scheduling_policy)
        self.preemption: PreemptionPolicy = make_preemption(engine.scheduling_policy)
        self.recompute_all = engine.kv_cache_mode == "none"
        self.use_cohort = use_cohort and not self.recompute_all
        self.cohort = DecodeCohort(engine.block_size)
        # a CPU tier stores every block as it fills, in stepping order (the reference loop registers each scheduled
        # request's full blocks at once), so the cohort registers its members' decode blocks as they fill too;
        # without one it leaves them to the finish (no other request can hit a block of generated tokens before)
        self.registers_decodes = kv.tier is not None and kv.caching
        self.prefilling: list[RequestState] = []  # running requests outside the cohort, in running order
        self._seq = 0
        self.deferred = False  # the last schedule left out a request it could see now, for the async cutoff
        # the last schedule refused the head of the queue for room or budget while a CPU tier holds blocks: a decode
        # that takes a free block may evict the head's GPU prefix hit into the tier (and a store may evict its tier
        # hit), after which it can leave to load what it could not allocate or fit, so each iteration is scheduled
        self.head_refused = False
        self.loading = LoadingRequests()  # waiting for KV blocks copied in from the CPU tier
        self.landed: dict[int, RequestState] = {}  # copied in, waiting holding those blocks, by request id
        self.lora = (
            LoraSlots(engine.lora_slots, engine.max_cpu_loras, engine.lora_h2d_s, engine.lora_read_s)
            if engine.lora_slots
            else None
        )
        spec = engine.speculative
        self.spec_tokens = spec.num_speculative_tokens if spec is not None else 0  # drafts verified per step

    def has_work(self) -> bool:
        return bool(self.running) or len(self.waiting) > 0 or bool(self.loading.states)

    # ---- request state: in, out, gauges ----

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting) + len(self.loading.states)  # vLLM keeps loading requests in its waiting queue

    def add(self, state: RequestState) -> None:
        self.waiting.add(state)

    def next_submitted_s(self) -> float | None:
        """When the head of the waiting queue reached the engine (None: nothing waits)."""
        return self.waiting.peek().submitted_s if len(self.waiting) else None

    def to_cohort(self, state: RequestState) -> None:
        """A running request whose prefill is done decodes with the cohort from now on."""
        if self.use_cohort and state in self.prefilling:
            self.prefilling.remove(state)
            self.cohort.join(state)

    def finish(self, state: RequestState) -> None:
        """A request generated its last token (already out of the cohort): its full blocks stay in the
        prefix cache, the rest are freed."""
        if self.kv.caching and (not state.req.private or self.kv.hashes_private):
            self.kv.cache_full_blocks(state.rid, state.token_segments(), state.num_computed)
        self.running.remove(state)
        if state in self.prefilling:
            self.prefilling.remove(state)
        self.kv.free(state.rid)
        self.kv.forget(state.rid)

    def expire(self, now: float, timeout_s: float) -> list[RequestState]:
        """Take out every request sent timeout_s or more before now (its client gave up; the sum as the engine's
        deadline computes it, so that the two agree to the bit), freeing its blocks; running ones first, then
        waiting ones in queue order."""
        gone = [s for s in self.running if s.req.arrival_s + timeout_s <= now]
        for state in gone:
            if state.rid in self.cohort.members:
                self.cohort.leave(state)
            elif state in self.prefilling:
                self.prefilling.remove(state)
            self.running.remove(state)
            self.kv.free(state.rid)
        for state in self.loading.expire(now, timeout_s):
            self.kv.free(state.rid)
            gone.append(state)
        kept: list[RequestState] = []
        for state in pop_all(self.waiting):
            if state.req.arrival_s + timeout_s <= now:
                self.kv.free(state.rid)  # a request back from the CPU tier waits holding its loaded blocks
                gone.append(state)
            else:
                kept.append(state)
        for state in kept:
            self.waiting.add(state)
        for state in gone:
            self.kv.forget(state.rid)
            self.landed.pop(state.rid, None)
        return gone

    def in_flight(self) -> list[RequestState]:
        """Every request not yet ended, running first, waiting in queue order (the queue is unchanged)."""
        self.dissolve_cohort()
        waiting = pop_all(self.waiting)
        for state in waiting:
            self.waiting.add(state)
        return [*self.running, *self.loading.states, *waiting]

    def drain(self) -> list[RequestState]:
        """Hand back every request (the replica is gone): running first, then waiting."""
        self.dissolve_cohort()
        lost = [*self.running, *self.loading.take_all(), *pop_all(self.waiting)]
        self.running.clear()
        for state in lost:  # blocks copied back from the CPU tier stay with the lost replica
            state.loaded_tokens = 0
        self.landed.clear()
        return lost

    def _chunk(self, remaining: int, budget: int) -> int:
        if self.recompute_all or not self._chunked:
            return remaining if remaining <= budget else 0
        if self._long_prefill:
            remaining = min(remaining, self._long_prefill)
        return min(remaining, budget)

    def schedule(self, now: float, admit_before: float | None = None) -> StepPlan:
        """The next iteration's plan; waiting requests the engine got after admit_before (default: now)
        are not yet visible to it."""
        shape = BatchShapeBuilder(self.attention_window)
        self.deferred = self.head_refused = False
        scheduled: list[tuple[RequestState, int]] = []
        preempted: list[RequestState] = []
        budget = self._schedule_cohort_step(scheduled, preempted, shape) if self.use_cohort else -1
        per_request = budget < 0
        if per_request:
            self.dissolve_cohort()
            budget = self._schedule_running(self._budget, scheduled, preempted, shape)
        if self.loading.states:
            for state in reversed(self.loading.done(now)):  # back to the front, in the order they left it
                self.waiting.prepend(state)
                self.landed[state.rid] = state
        if not preempted:
            self._admit_waiting(now, now if admit_before is None else admit_before, budget, scheduled, shape)
        cohort_steps = not per_request and self.cohort.size > 0
        if self.lora is not None:  # the batch's adapters, and copying the new ones into GPU slots
            adapters = {s.req.lora_id for s, _ in scheduled if s.req.lora_id}
            built = shape.build(len(adapters), self.lora.load_s(adapters))
        else:
            built = shape.build()
        return StepPlan(tuple(scheduled), tuple(preempted), built, cohort_steps, per_request)

    # ---- the fast path: the running loop's outcome without visiting every decode ----

    def _prefill_asks(self, budget: int) -> list[tuple[RequestState, int]] | None:
        """Tokens each prefilling request gets, walking running order with cohort members taking one
        token each; None when some cohort member would get nothing (budget exhausted before it)."""
        asks, used = [], 0
        for state in self.prefilling:
            left = budget - self.cohort.count_before(state.admit_seq) - used
            new = self._chunk(state.num_tokens - state.num_computed, left) if left > 0 else 0
            asks.append((state, new))
            used += new
        return asks if self.cohort.size + used <= budget else None

    def _schedule_cohort_step(
        self, scheduled: list[tuple[RequestState, int]], preempted: list[RequestState], shape: BatchShapeBuilder
    ) -> int:
        """Schedule every running request at once; -1 when only the per-request loop can decide."""
        budget = self._budget
        asks = self._prefill_asks(budget)
        if asks is None:
            return -1
        # (running position, request, tokens after this step; 0 = a decode that needs exactly one block)
        growth = [(state.admit_seq, state, state.num_computed + new) for state, new in asks if new]
        if self.kv.mode == "paged":
            due = self.cohort.due(self.cohort.clock)
            needed = len(due) + sum(self.kv.blocks_needed(s.rid, tokens) for _, s, tokens in growth)
            if needed > self.kv.pool.num_free and not self.preemption.takes_tail:
                return -1  # a victim inside the order frees budget for later requests: the reference loop
            if needed <= self.kv.pool.num_free:  # every allocation succeeds: no preemption to decide
                self._allocate_all(growth, due)
                growth = []
            else:
                growth = sorted(growth + [(member.admit_seq, member, 0) for member in due], key=_position)
        gone = self._allocate_or_preempt(growth, preempted)
        clock = self.cohort.clock
        fills = self.cohort.due(clock + 1) if self.registers_decodes else []
        filled = 0  # fills registered so far: those ahead of the next prefill in running order
        for state, new in asks:
            if new and state.rid not in gone:
                filled = self._register_fills(fills, filled, state.admit_seq, clock)
                self._register(state, state.num_computed + new)
                scheduled.append((state, new))
                shape.add(new, state.num_computed, state.num_computed + new >= state.num_tokens)
        self._register_fills(fills, filled, -1, clock)
        shape.add_decodes(self.cohort.size, self.cohort.kv_tokens)
        return budget - self.cohort.size - sum(new for _, new in scheduled)

    def _register_fills(self, fills: list[RequestState], start: int, before_seq: int, clock: int) -> int:
        """Register fills[start:] up to the first member at or after running position before_seq (-1: all) for the
        iteration at `clock`; where the next starts."""
        end = start
        while end < len(fills) and (before_seq < 0 or fills[end].admit_seq < before_seq):
            self._register_fill(fills[end], clock)
            end += 1
        return end

    def register_fills(self, clock: int) -> None:
        """With a CPU tier (the caller checks registers_decodes): the cohort's members whose KV block fills in the
        iteration at `clock` register it, in running order (a closed-form decode run's iterations after its
        first, as if each were scheduled)."""
        self._register_fills(self.cohort.due(clock + 1), 0, -1, clock)

    def _register_fill(self, member: RequestState, clock: int) -> None:
        """A cohort member's block that its decode at `clock` fills enters the prefix cache and the CPU tier (the
        reference loop's _register for a decode: the tokens after the step are the prompt and every output)."""
        output = member.num_output + clock - member.sync_clock
        segments = [*member.req.segments, (member.req.output_content_id, output)]
        self.kv.cache_full_blocks(member.rid, segments, member.num_computed + clock - member.sync_clock + 1)

    def _allocate_or_preempt(
        self, growth: list[tuple[int, RequestState, int]], preempted: list[RequestState]
    ) -> set[int]:
        """Blocks for each entry in running order, preempting the policy's victim (the tail: see
        _schedule_cohort_step) when they run out; the ids of the preempted."""
        gone: set[int] = set()
        for _, state, tokens in growth:
            if state.rid in gone:
                continue
            while not (self.kv.allocate(state.rid, tokens) if tokens else self.kv.append_block(state.rid)):
                victim = self._preempt_victim()
                gone.add(victim.rid)
                preempted.append(victim)
                if victim is state:
                    break
        return gone

    def _allocate_all(self, prefills: list[tuple[int, RequestState, int]], due: list[RequestState]) -> None:
        """Blocks for every prefill and due decode in running order (both lists are in it), known to fit:
        the decodes in bulk between prefills."""
        kv, start = self.kv, 0
        for position, state, tokens in prefills:
            end = start
            while end < len(due) and due[end].admit_seq < position:
                end += 1
            kv.append_blocks([member.rid for member in due[start:end]])
            kv.allocate(state.rid, tokens)
            start = end
        kv.append_blocks([member.rid for member in due[start:]])

    def _preempt_victim(self) -> RequestState:
        """The policy's victim, out of the running list and the cohort or the prefilling list."""
        victim = self.running.pop(self.preemption.victim_index(self.running))
        if victim.rid in self.cohort.members:
            self.cohort.leave(victim)
        else:
            self.prefilling.remove(victim)
        self._preempt(victim)
        return victim

    def dissolve_cohort(self) -> None:
        self.cohort.dissolve()
        self.prefilling = []

    def rebuild_cohort(self) -> None:
        """After a per-request step: decoding requests rejoin the cohort, the rest are prefilling."""
        if not self.use_cohort:
            return
        self.cohort.dissolve()
        self.prefilling = []
        for state in self.running:
            if state.is_decoding:
                self.cohort.join(state)
            else:
                self.prefilling.append(state)

    # ---- the reference path: request by request ----

    def _schedule_running(
        self,
        budget: int,
        scheduled: list[tuple[RequestState, int]],
        preempted: list[RequestState],
        shape: BatchShapeBuilder,
    ) -> int:
        running, kv, index = self.running, self.kv, 0
        while index < len(running) and budget > 0:
            state = running[index]
            done = state.num_computed + state.num_inflight  # in flight: scheduled in a pipeline batch
            remaining = state.num_tokens - done
            if remaining <= 0:  # its token (and any drafts: 1 + k in flight for 1 left) still in flight: nothing new
                index += 1
                continue
            if self.spec_tokens and state.num_output and remaining == 1:  # its token and the k drafts
                new = min(1 + self.spec_tokens, self.cfg.max_model_len - done, budget)
            else:
                new = self._chunk(remaining, budget)
            if new == 0 and scheduled:
                index += 1
                continue
            new = new or remaining  # recompute-all: an oversized lone step
            while not kv.allocate(state.rid, done + new, computed_tokens=done):
                victim_at = self.preemption.victim_index(running)
                victim = running.pop(victim_at)
                budget += _unschedule(victim, scheduled)
                self._preempt(victim)
                preempted.append(victim)
                index -= victim_at < index
                if victim is state:
                    break
            else:
                scheduled.append((state, new))
                budget -= new
                index += 1
        for state, new in scheduled:
            done, total = state.num_computed + state.num_inflight, state.num_tokens
            self._register(state, min(done + new, total))
            if done + new > total:  # speculative decoding: the drafts verified with the token
                shape.add_verify(new, done)
            else:
                shape.add(new, done, done + new >= total)
        return budget

    def _preempt(self, state: RequestState) -> None:
        if self.kv.caching:
            self.kv.cache_full_blocks(state.rid, state.token_segments(), state.num_computed, preempting=True)
        self.kv.free(state.rid)
        state.num_computed = 0
        state.num_inflight = 0  # a batch in flight that holds it hands its tokens back to nobody
        state.status = "preempted"
        state.num_preemptions += 1
        self.waiting.prepend(state)

    # ---- admission ----

    def _register(self, state: RequestState, num_tokens_after: int) -> None:
        """Full blocks of a scheduled request enter the prefix cache as they are allocated."""
        if self.kv.caching and (not state.req.private or self.kv.hashes_private):
            self.kv.cache_full_blocks(state.rid, state.token_segments(), num_tokens_after)

    def inflight_reservation(self) -> int:
        """Blocks the in-flight prefills still need to hold their whole sequence (vLLM >= 0.23
        `Scheduler._inflight_prefill_reserved_blocks`: running requests still prefilling, loads from the CPU tier in
        progress, and loads landed but not yet admitted), which a new load may not take."""
        kv, limit = self.kv, self.cfg.max_model_len
        prefilling = [state for state in self.running if not state.is_decoding]
        return sum(
            kv.blocks_needed(state.rid, min(state.num_tokens, limit))
            for state in (*prefilling, *self.loading.states, *self.landed.values())
        )

    def _admit_waiting(
        self,
        now: float,
        admit_before: float,
        budget: int,
        scheduled: list[tuple[RequestState, int]],
        shape: BatchShapeBuilder,
    ) -> None:
        kv = self.kv
        slots = self._lora_slots
        adapters = {0} | {s.req.lora_id for s in self.running} if slots else {0}  # 0: the base model
        skipped: list[RequestState] = []
        while len(self.waiting) and budget > 0 and len(self.running) < self._max_num_seqs:
            state = self.waiting.peek()
            lora_id = state.req.lora_id
            if lora_id not in adapters and len(adapters) > slots:  # vLLM: max_loras adapters a batch
                skipped.append(self.waiting.pop())  # skipped, not blocking: the queue goes on without it
                continue
            if state.submitted_s > admit_before:
                self.deferred = state.submitted_s <= now  # visible now: the next schedule may admit it
                break
            reserved = self.inflight_reservation if self._reserve_inflight else None
            found = admission_start(state, now, kv, self.loading, self.waiting, self._load_s_per_block, reserved)
            if isinstance(found, bool):  # it went to load blocks from the CPU tier, or there was no room to
                if found:
                    continue
                self.head_refused = kv.tier is not None
                break
            hit, start, counted = found
            new = self._chunk(state.num_tokens - start, budget)
            if new == 0:  # over the budget: once its GPU hit is evicted into the tier it may leave to load (no budget)
                self.head_refused = kv.tier is not None
                break
            reserve = state.num_tokens if self._reserve_prompt else 0
            if not kv.allocate(state.rid, start + new, hit, reserve):
                self.head_refused = kv.tier is not None
                break
            self.waiting.pop()
            if not counted:
                kv.record_admission(state.num_tokens, hit.num_tokens)
            self._admit(state, now, start)
            self._register(state, start + new)
            scheduled.append((state, new))
            shape.add(new, state.num_computed, state.num_computed + new >= state.num_tokens)
            budget -= new
            adapters.add(lora_id)
        for state in reversed(skipped):  # back in front, in their order
            self.waiting.prepend(state)

    def _admit(self, state: RequestState, now: float, cached: int) -> None:
        self.running.append(state)
        state.loaded_tokens = 0  # blocks copied back from the CPU tier are its own now (a failed try kept them)
        self.landed.pop(state.rid, None)
        if self.use_cohort:
            self.prefilling.append(state)
        state.admit_seq = self._seq
        self._seq += 1
        state.status = "running"
        state.num_computed = cached
        if state.first_token_s < 0:  # re-admissions after the first token do not change TTFT's split
            state.cached_tokens = cached
            state.last_admit_s = now
            state.prefill_s = 0.0
        if state.first_scheduled_s < 0:
            state.first_scheduled_s = now


def _position(entry: tuple[int, RequestState, int]) -> int:
    return entry[0]


def _unschedule(victim: RequestState, scheduled: list[tuple[RequestState, int]]) -> int:
    """Take a preempted request out of this step's list; the tokens it had (0 if not scheduled yet)."""
    for position, (state, new) in enumerate(scheduled):
        if state is victim:
            del scheduled[position]
            return new
    return 0
