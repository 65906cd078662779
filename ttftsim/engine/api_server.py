"""The API-server process in front of one engine: one asyncio loop that serialises its work.

vLLM's OpenAI server (vllm/entrypoints/openai/api_server.py, one process by default) parses each HTTP
request, tokenizes it and hands it to the engine core (AsyncLLM.add_request: the input processor, then
ZMQ); the engine core's own per-request work (Request creation, block hashes) happens in its input thread.
Every step's outputs come back as one batch that the output handler processes (AsyncLLM.output_handler ->
OutputProcessor.process_outputs: detokenize, build RequestOutputs) before each stream's coroutine writes
its SSE chunk. One loop does all of it, so work queues: a first token waits for the work already there
(other streams' tokens, other requests' tokenization). Modelled as one FIFO server (Lindley's recursion):
a request reaches the engine when its ingress work is done; the tokens of a step are delivered when the
step's output work is done. Only the loop's own work serialises (the tokenizer pool and ZMQ's I/O threads run
beside it), so the costs are the CPU time of the process's main thread, from a microbenchmark of the real
server (benchmarks/vllm_cpu/api_server_costs.py), never from measured TTFTs. The hand-offs' wall time (HTTP,
ZMQ, wake-ups; ApiServerCosts.hop_latency_s) queues nothing: the recorder adds it to each request's latencies.

Left out: delays of tokens after the first (TPOT and end-to-end latency are the engine's), the /metrics
scrape, several API-server processes (--api-server-count), Python GC pauses (measured negligible while
the real server serves: benchmarks/vllm_cpu/gc_pauses.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ApiServerCostsS:
    """CPU seconds of the API server's work (and the engine core's input thread) per item."""

    per_request_s: float = 0.0
    per_prompt_token_s: float = 0.0
    per_output_token_s: float = 0.0
    per_step_s: float = 0.0  # receiving and dispatching one step's output batch, whatever its size

    @property
    def is_free(self) -> bool:
        return not (self.per_request_s or self.per_prompt_token_s or self.per_output_token_s or self.per_step_s)

    def output_s(self, num_tokens: int) -> float:
        """The work of one step's outputs."""
        return self.per_step_s + self.per_output_token_s * num_tokens if num_tokens else 0.0


class ApiServer:
    """One FIFO server. Invariant: free_at is when the work handed to it so far is done; work is handed
    to it in time order."""

    __slots__ = ("costs", "free_at")

    def __init__(self, costs: ApiServerCostsS) -> None:
        self.costs = costs
        self.free_at = 0.0

    def ingress(self, now: float, prompt_tokens: int) -> float:
        """A request sent at `now`: when the engine core has it."""
        costs = self.costs
        work = costs.per_request_s + costs.per_prompt_token_s * prompt_tokens
        self.free_at = (now if now > self.free_at else self.free_at) + work
        return self.free_at

    def outputs(self, now: float, num_tokens: int) -> float:
        """A step that ended at `now` produced num_tokens tokens: when they have been processed."""
        self.free_at = (now if now > self.free_at else self.free_at) + self.costs.output_s(num_tokens)
        return self.free_at

    def output_run(
        self,
        start: float,
        ends: Sequence[float],
        durations: Sequence[float],
        num_tokens: int,
        delivered: list[float] | None = None,
    ) -> None:
        """The steps of a decode run (ends relative to start, and their durations), num_tokens tokens each;
        when each step's tokens have been processed is appended to `delivered` (if given), as `outputs`
        returns it."""
        work = self.costs.output_s(num_tokens)
        if not len(ends) or (not work and delivered is None):
            return
        if delivered is None and self.free_at <= start + float(ends[0]) and work <= float(min(durations)):
            self.free_at = start + float(ends[-1]) + work  # never backs up
            return
        free = self.free_at
        for end in ends:
            at = start + float(end)
            free = (at if at > free else free) + work
            if delivered is not None:
                delivered.append(free)
        self.free_at = free
