"""Open-loop workloads: every request drawn up front (synthetic, shared-prefix or a trace), and a SimPy
source that replays their arrival times, handing each request to `submit` (an engine or a router) without
waiting for it to end. Also what every driver of a run shares: its context (RNG, request and content ids)
and the synthetic prompt pool.

Closed-loop clients are workload/closed_loop.py, multi-turn conversations workload/conversations.py;
workload/start.py picks a workload's driver."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
import simpy
from numpy.typing import NDArray

from ttftsim.config.scenario import Client, DatasetSampling
from ttftsim.config.workload import (
    ClosedLoop,
    LoraTraffic,
    SharedPrefixWorkload,
    SyntheticWorkload,
    TraceWorkload,
    Workload,
)
from ttftsim.kvcache.hashing import Segment
from ttftsim.workload.arrivals import arrival_times
from ttftsim.workload.budget import RequestCounter
from ttftsim.workload.clients import behaviour
from ttftsim.workload.lengths import sample_lengths
from ttftsim.workload.request import ContentIds, Request, synthetic_requests
from ttftsim.workload.traces import load_trace

Submit = Callable[[Request, simpy.Event | None], object]


class RequestIds:
    """Request ids of one run: 0, 1, 2, ... in the order asked (`next`), or a block of them at once (`reserve`)."""

    def __init__(self) -> None:
        self._ids = ContentIds()

    def __iter__(self) -> RequestIds:
        return self

    def __next__(self) -> int:
        return self._ids.new()

    def reserve(self, count: int) -> int:
        return self._ids.reserve(count)


class WorkloadContext:
    """What every generator shares in one run: the seeded RNG, request and content ids, the base folder."""

    def __init__(self, rng: np.random.Generator, base: Path) -> None:
        self.rng = rng
        self.base = base
        self.content = ContentIds()
        self.request_ids = RequestIds()
        self.sent = RequestCounter()  # closed loops and conversations: stopped at the request limit


class PromptPool:
    """The prompts a synthetic workload sends: a new one per request, or, for a tool that generates a fixed
    dataset (aiperf/genai-perf --num-dataset-entries), `entries` prompts picked as the tool does
    (workload/clients.py): each pass in order (sequential), each pass in a new random order (shuffle), or each
    request's entry drawn uniformly with replacement (random). An entry keeps its content and lengths."""

    def __init__(
        self, spec: SyntheticWorkload, ctx: WorkloadContext, entries: int | None, sampling: DatasetSampling
    ) -> None:
        self.spec, self.ctx, self.sampling = spec, ctx, sampling
        tokens = spec.shared_prefix_tokens
        self.shared: tuple[Segment, ...] = ((ctx.content.new(), tokens),) if tokens else ()
        self.entries: list[tuple[tuple[Segment, ...], int, int]] = []
        if entries is not None:
            self.entries = [self._new_prompt() for _ in range(entries)]
        self._order: list[int] = []
        self.private = not (self.shared or self.entries)  # no two requests can share a block

    def _new_prompt(self) -> tuple[tuple[Segment, ...], int, int]:
        prompt = int(sample_lengths(self.spec.prompt_tokens, self.ctx.rng, 1, self.ctx.base)[0])
        output = int(sample_lengths(self.spec.output_tokens, self.ctx.rng, 1, self.ctx.base)[0])
        return (*self.shared, (self.ctx.content.new(), prompt)), self.spec.shared_prefix_tokens + prompt, output

    def next(self) -> tuple[tuple[Segment, ...], int, int]:
        """The next request's (segments, prompt tokens, output tokens)."""
        if not self.entries:
            return self._new_prompt()
        if self.sampling == "random":
            return self.entries[int(self.ctx.rng.integers(len(self.entries)))]
        if not self._order:
            count = len(self.entries)
            order = self.ctx.rng.permutation(count).tolist() if self.sampling == "shuffle" else list(range(count))
            self._order = order[::-1]  # popped from the end
        return self.entries[self._order.pop()]

    def request(self, arrival_s: float, priority: int = 0) -> Request:
        segments, prompt, output = self.next()
        request_id = next(self.ctx.request_ids)
        return Request(request_id, arrival_s, prompt, output, segments, priority, private=self.private)


def _synthetic_requests(spec: SyntheticWorkload, ctx: WorkloadContext, pool: PromptPool | None) -> Sequence[Request]:
    requests = _synthetic_base_requests(spec, ctx, pool)
    return requests if spec.lora is None else with_adapters(list(requests), spec.lora, ctx)


def with_adapters(requests: list[Request], lora: LoraTraffic, ctx: WorkloadContext) -> list[Request]:
    """Each request asks for an adapter (1..N, uniform or Zipf: adapter i with weight 1 / i^s) or, with
    probability base_share, the base model (0). Blocks are shared only under the same adapter (vLLM puts
    the LoRA name in each block's hash), so a shared system prompt gets one content id per adapter."""
    ranks = np.arange(1, lora.adapters + 1, dtype=np.float64)
    weights = np.ones_like(ranks) if lora.popularity == "uniform" else ranks**-lora.zipf_exponent
    chosen = ctx.rng.choice(lora.adapters, size=len(requests), p=weights / weights.sum()) + 1
    base = ctx.rng.random(len(requests)) < lora.base_share
    per_adapter: dict[tuple[int, int], int] = {}
    out = []
    for request, adapter, on_base in zip(requests, chosen.tolist(), base.tolist(), strict=True):
        lora_id = 0 if on_base else int(adapter)
        segments = request.segments
        if lora_id and len(segments) > 1:  # a shared prefix: shared within the adapter only
            key = (segments[0][0], lora_id)
            if key not in per_adapter:
                per_adapter[key] = ctx.content.new()
            segments = ((per_adapter[key], segments[0][1]), *segments[1:])
        out.append(request.replace(lora_id=lora_id, segments=segments))
    return out


def _synthetic_base_requests(
    spec: SyntheticWorkload, ctx: WorkloadContext, pool: PromptPool | None
) -> Sequence[Request]:
    assert not isinstance(spec.arrivals, ClosedLoop)
    times = arrival_times(spec.arrivals, ctx.rng, spec.duration_s, spec.num_requests)
    if pool is not None and pool.entries:
        priorities = ctx.rng.integers(0, spec.priority_levels, len(times)).tolist()
        return [pool.request(t, prio) for t, prio in zip(times.tolist(), priorities, strict=True)]
    prompts = sample_lengths(spec.prompt_tokens, ctx.rng, len(times), ctx.base)
    outputs = sample_lengths(spec.output_tokens, ctx.rng, len(times), ctx.base)
    priorities = ctx.rng.integers(0, spec.priority_levels, len(times))
    shared = ((ctx.content.new(), spec.shared_prefix_tokens),) if spec.shared_prefix_tokens else ()
    return SyntheticRequests(times, prompts, outputs, priorities, ctx, shared)


class SyntheticRequests(Sequence[Request]):
    """A synthetic open loop's requests, made as they are read: four numbers a request (a Request object with
    its segments takes about 280 bytes; a fleet's day is 4.3 million requests). Request i has the i-th
    arrival, lengths and priority drawn, request id and prompt content id the i-th of blocks reserved when
    drawn, so it equals the Request a list built at once would hold, and a read never draws anything."""

    CHUNK = 4096  # requests turned into Python numbers at a time

    def __init__(
        self,
        times: NDArray[np.float64],
        prompts: NDArray[np.int64],
        outputs: NDArray[np.int64],
        priorities: NDArray[np.int64],
        ctx: WorkloadContext,
        shared: tuple[Segment, ...],
    ) -> None:
        self.columns = (times, prompts, outputs, priorities)
        self.shared = shared
        self.first_id = ctx.request_ids.reserve(len(times))
        self.first_content = ctx.content.reserve(len(times))

    def __len__(self) -> int:
        return len(self.columns[0])

    def _chunk(self, start: int, stop: int) -> list[Request]:
        times, prompts, outputs, priorities = (column[start:stop].tolist() for column in self.columns)
        first_id, first_content = self.first_id + start, self.first_content + start
        return synthetic_requests(first_id, first_content, self.shared, times, prompts, outputs, priorities)

    def __iter__(self) -> Iterator[Request]:
        for start in range(0, len(self), self.CHUNK):
            yield from self._chunk(start, start + self.CHUNK)

    @overload
    def __getitem__(self, index: int) -> Request: ...

    @overload
    def __getitem__(self, index: slice) -> list[Request]: ...

    def __getitem__(self, index: int | slice) -> Request | list[Request]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = range(len(self))[index]  # negative indices, IndexError
        return self._chunk(i, i + 1)[0]


def _shared_prefix_requests(spec: SharedPrefixWorkload, ctx: WorkloadContext) -> list[Request]:
    prompts: list[tuple[Segment, ...]] = []
    for _ in range(spec.num_groups):
        system: tuple[Segment, ...] = ((ctx.content.new(), spec.system_prompt_len),) if spec.system_prompt_len else ()
        prompts += [(*system, (ctx.content.new(), spec.question_len)) for _ in range(spec.num_prompts_per_group)]
    order = ctx.rng.permutation(len(prompts))
    prompts = [prompts[i] for i in order]
    times = arrival_times(spec.arrivals, ctx.rng, spec.duration_s, spec.num_requests)
    length = spec.system_prompt_len + spec.question_len
    return [
        Request(next(ctx.request_ids), float(t), length, spec.output_len, prompts[i % len(prompts)])
        for i, t in enumerate(times)
    ]


def open_loop_requests(workload: Workload, ctx: WorkloadContext, client: Client | None = None) -> Sequence[Request]:
    """Every request of an open-loop workload, in arrival order."""
    if isinstance(workload, SyntheticWorkload):
        tool = behaviour(client or Client())
        pool = PromptPool(workload, ctx, tool.dataset_entries, tool.sampling) if tool.dataset_entries else None
        return _synthetic_requests(workload, ctx, pool)
    if isinstance(workload, SharedPrefixWorkload):
        return _shared_prefix_requests(workload, ctx)
    assert isinstance(workload, TraceWorkload)
    requests = load_trace(workload, ctx.base, ctx.rng, ctx.content)
    for _ in requests:
        next(ctx.request_ids)
    return requests


def open_loop_source(
    env: simpy.Environment, requests: Iterable[Request], submit: Submit
) -> Generator[simpy.Event, Any, float]:
    for req in requests:
        if req.arrival_s > env.now:
            yield env.timeout(req.arrival_s - env.now)
        submit(req, None)
    return float(env.now)  # when the traffic ended
