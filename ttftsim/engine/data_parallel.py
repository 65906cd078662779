"""A replica of several data-parallel engines: vLLM `--data-parallel-size N` (docs/engine-semantics.md 16).

Source (vllm-project/vllm 0.15.1):
- v1/engine/core.py `run_engine_core`: the ranks of an MoE model run `DPEngineCoreProc`; any other model's ranks
  are independent engines ("Non-MoE DP ranks are completely independent, so treat like DP=1").
- `DPEngineCoreProc.run_busy_loop`: every rank steps; a rank with nothing scheduled while others run executes a
  dummy batch (v1/worker/gpu_worker.py `execute_dummy_batch`: `_dummy_run(1, uniform_decode=True)`), since its
  MoE layers' collectives (dispatch and combine over the DP group) need every rank; the wave ends when no rank
  has unfinished requests (an all-reduce every 32 steps).
- v1/worker/gpu_model_runner.py with v1/worker/dp_utils.py `coordinate_batch_across_dp`: unless the engine runs
  eager (cudagraph_mode NONE), every rank's batch is padded to the largest rank's token count.
- v1/engine/core_client.py `DPLBAsyncMPClient.get_core_engine_for_request`: the engine with the lowest
  waiting x 4 + running, searched from the API server's own start index, the first lowest wins; between the
  coordinator's stats (every 100 ms) the API server counts its own picks as waiting. v1/entrypoints/cli/serve.py:
  one API server per DP rank by default (internal load balancing).

The cost of a step of one rank (perf/): the experts see every rank's tokens, whole experts over TP x DP GPUs
with expert parallelism, every expert sliced over them without (perf/ffn.py), plus the dispatch and combine.

Model: the ranks are Engines of TP x PP GPUs each (own scheduler, KV cache, API-server process) behind one
load balancer that sees every rank's current counts (the 100 ms staleness is left out) and starts its search at
the next rank each time (requests spread over the DP API servers, each starting at its own index). An MoE
model's ranks step together: each step lasts its longest rank's time, every rank's dense and expert layers at
the largest rank's token count (not when eager), an idle rank running the one-token dummy batch while any rank
has work; the group goes idle when no rank has (the up-to-31 dummy steps before vLLM's wave ends are left out:
an arrival then waits at most one dummy step). Ranks of other models run as independent engines.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from ttftsim.config.resolved_engine import ResolvedEngine
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import Recorder
from ttftsim.engine.state import RequestState
from ttftsim.engine.step_plan import StepPlan
from ttftsim.kvcache.offload import LMCacheTiers, RemoteStores
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.linear import StepCostModel
from ttftsim.workload.request import Request

WAITING_WEIGHT = 4  # vLLM's DP load-balancing score: waiting x 4 + running
DUMMY_BATCH = BatchShape(num_decode_seqs=1, decode_kv_tokens=1)  # execute_dummy_batch: one token, no sampling


class RankKv:
    """The replica's KV gauges and counters over its ranks (what metrics and summaries read of an engine's kv)."""

    def __init__(self, ranks: list[Engine]) -> None:
        self._ranks = ranks

    def usage(self) -> float:
        """Mean KV-cache usage of the ranks (vLLM reports one gauge per engine)."""
        return sum(rank.kv.usage() for rank in self._ranks) / len(self._ranks)

    @property
    def query_tokens(self) -> int:
        return sum(rank.kv.query_tokens for rank in self._ranks)

    @property
    def hit_tokens(self) -> int:
        return sum(rank.kv.hit_tokens for rank in self._ranks)

    @property
    def lmcache_tiers(self) -> list[LMCacheTiers]:
        return [rank.kv.lmcache for rank in self._ranks if rank.kv.lmcache is not None]


class DataParallelReplica:
    """DP engines behind vLLM's load balancer, stepped together when `lockstep` (an MoE model). It answers what
    simulate and the cluster ask of an Engine: submit, the queue and KV gauges, in_flight, settle, fail_all."""

    def __init__(self, env: simpy.Environment, ranks: list[Engine], lockstep: bool) -> None:
        assert len(ranks) > 1
        self.env, self.ranks, self.lockstep = env, ranks, lockstep
        first = ranks[0]
        self.cfg, self.recorder, self.replica = first.cfg, first.recorder, first.replica
        self.num_blocks = first.num_blocks  # per rank (each rank's KV cache)
        self.kv = RankKv(ranks)
        self.accepts_pushes = True
        self._next_start = 0
        self._pad = first.cfg.cudagraph_mode != "NONE"  # DP padding needs CUDA graphs (gpu_model_runner.py)
        group = [rank.admission for rank in ranks]  # one API server counts every rank's requests
        for member in group:
            member.group = group
        self.process: simpy.Process | None = env.process(self._loop()) if lockstep else None

    # ---- what an Engine answers ----

    @property
    def on_end(self) -> Callable[[RequestState, str], None] | None:
        return self.ranks[0].on_end

    @on_end.setter
    def on_end(self, callback: Callable[[RequestState, str], None] | None) -> None:
        for rank in self.ranks:
            rank.on_end = callback

    @property
    def on_first_token(self) -> Callable[[RequestState], None] | None:
        return self.ranks[0].on_first_token

    @on_first_token.setter
    def on_first_token(self, callback: Callable[[RequestState], None] | None) -> None:
        for rank in self.ranks:
            rank.on_first_token = callback

    @property
    def num_running(self) -> int:
        return sum(rank.num_running for rank in self.ranks)

    @property
    def num_waiting(self) -> int:
        return sum(rank.num_waiting for rank in self.ranks)

    def pick(self) -> Engine:
        """The rank the load balancer sends the next request to: the lowest waiting x 4 + running, searched
        from the next start index, the first lowest kept (DPLBAsyncMPClient.get_core_engine_for_request)."""
        ranks, start = self.ranks, self._next_start
        self._next_start = (start + 1) % len(ranks)
        best, best_score = ranks[start], -1
        for offset in range(len(ranks)):
            rank = ranks[(start + offset) % len(ranks)]
            score = WAITING_WEIGHT * rank.num_waiting + rank.num_running
            if best_score < 0 or score < best_score:
                best, best_score = rank, score
        return best

    def submit(self, req: Request, waiter: simpy.Event | None = None) -> RequestState:
        return self.pick().submit(req, waiter)

    def in_flight(self) -> list[RequestState]:
        return [state for rank in self.ranks for state in rank.in_flight()]

    def settle(self) -> None:
        for rank in self.ranks:
            rank.settle()

    def fail_all(self) -> list[RequestState]:
        if self.process is not None and self.process.is_alive:
            self.process.interrupt("replica lost")
        return [state for rank in self.ranks for state in rank.fail_all()]

    # ---- lockstep (MoE) ----

    def step_time_s(self, shapes: list[BatchShape | None], from_idle: bool) -> float:
        """One step of every rank (None: the dummy batch), padded to the largest rank's tokens: the longest."""
        top = max((shape or DUMMY_BATCH).num_tokens for shape in shapes) if self._pad else 0
        longest = 0.0
        for rank, shape in zip(self.ranks, shapes, strict=True):
            batch = (shape or DUMMY_BATCH).with_dp_tokens(top)
            time_s = rank.perf.idle_start_s(batch) if from_idle else rank.perf.time_s(batch)
            if shape is not None:
                time_s = rank.kv.with_transfers(time_s + shape.lora_load_s)  # LMCache loads and stores (loading.py)
            longest = max(longest, time_s)
        return longest

    def _plan(self, rank: Engine) -> StepPlan | None:
        """A rank's next step (None: nothing to run, the dummy batch while others run). A rank that cannot schedule
        its queue's head with nothing of its own running or loading has stalled (Engine.is_stuck): the other ranks'
        steps free none of its blocks."""
        rank.expire_clients()
        plan = rank.schedule_next() if rank.scheduler.has_work() else None
        if plan is not None and not plan.is_empty:
            rank.stalled_at_s = None
            return plan
        if plan is not None and rank.stalled_at_s is None and rank.is_stuck():
            rank.stalled_at_s = self.env.now
        return None

    def _loop(self) -> Generator[simpy.Event, Any, None]:
        env, ranks = self.env, self.ranks
        try:
            while True:
                plans = [self._plan(rank) for rank in ranks]
                if all(plan is None for plan in plans):
                    for rank in ranks:
                        rank.last_start_s = -1.0  # idle: the next arrival is scheduled at once
                    yield simpy.AnyOf(env, [rank.idle_until() for rank in ranks])
                    continue
                from_idle = all(rank.last_start_s < 0 for rank in ranks)
                start = env.now
                duration = self.step_time_s([plan.shape if plan else None for plan in plans], from_idle)
                for rank in ranks:
                    rank.last_start_s = start
                yield env.timeout(duration)
                for rank, plan in zip(ranks, plans, strict=True):
                    if plan is not None:
                        rank.complete(plan, start, duration)
                if env.peek() <= env.now:  # requests pushed at this very instant are seen by the next schedule
                    yield env.timeout(0)  # (when no event is due now, nothing can push first: no wait, engine.py)
        except simpy.Interrupt:
            return


ServingEngine = Engine | DataParallelReplica  # what a replica serves with: one engine, or its DP ranks


def serving_engine(
    env: simpy.Environment,
    cfg: ResolvedEngine,
    perf: StepCostModel,
    num_blocks: int,
    recorder: Recorder,
    lockstep: bool,
    **options: Any,
) -> ServingEngine:
    """One Engine, or cfg.dp ranks of num_blocks KV blocks each in a DataParallelReplica (`lockstep` for an MoE
    model: its ranks step together, each one iteration at a time). `options` are the Engine's keyword
    arguments, the same for every rank."""
    if cfg.dp == 1:
        return Engine(env, cfg, perf, num_blocks, recorder, **options)
    if lockstep:
        options["closed_form_decode"] = False
    if options.get("remote_stores") is None:  # the ranks are LMCache instances of one world size: one store
        options["remote_stores"] = RemoteStores()
    ranks = [Engine(env, cfg, perf, num_blocks, recorder, run_loop=not lockstep, **options) for _ in range(cfg.dp)]
    return DataParallelReplica(env, ranks, lockstep)


def lmcache_tiers(engine: ServingEngine) -> list[LMCacheTiers]:
    """LMCache's tiers of an engine or of each DP rank (none where LMCache does not run)."""
    if isinstance(engine, DataParallelReplica):
        return engine.kv.lmcache_tiers
    return [engine.kv.lmcache] if engine.kv.lmcache is not None else []


def queue_lengths(engine: ServingEngine) -> tuple[int, int]:
    """Requests in the waiting queues (not those loading KV) and running, over the ranks."""
    ranks = engine.ranks if isinstance(engine, DataParallelReplica) else [engine]
    return sum(len(rank.scheduler.waiting) for rank in ranks), sum(len(rank.scheduler.running) for rank in ranks)
