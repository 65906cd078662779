"""Benchmark clients as they behave: when closed-loop clients start, and how long a client takes between
a response and its next request.

- vllm-bench (`vllm bench serve --max-concurrency c`, vllm/benchmarks/serve.py): every request is created
  at once (request rate inf) behind an asyncio semaphore of c, so c requests go out together and each
  finish lets the next one through.
- guidellm (`--profile concurrent`), inference-perf (concurrency load): c workers start together, each
  sending its next request when the previous one ends.
- aiperf / genai-perf (`--concurrency c --warmup-request-count w`, aiperf timing/credit_issuing_strategy.py
  `_execute_phases`): the warm-up phase runs first; the profiling phase starts when every warm-up request
  has returned, with all c clients at once.
- ideal: clients start spread over the workload's ramp_up_s and send their next request the instant a
  response ends.
Every tool times TTFT from sending the request to the first streamed chunk (vLLM sends one whenever a step
produced token ids), so the first token is the visible one for all of them.

Turnaround (response end -> next send): measured on the real tools against the real server on this
machine kind (benchmarks/vllm_cpu/serve_runs, docs/engine-semantics.md); a scenario can set its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.config.scenario import Client


@dataclass(frozen=True)
class ClientBehaviour:
    synchronized_start: bool  # every client sends its first request at once (no ramp)
    barrier_after_warmup: bool  # the measured phase starts when every warm-up request has returned
    turnaround_s: float  # response end -> next send


MEASURED_TURNAROUND_S = 0.001  # replaced by the measurement of benchmarks/vllm_cpu (see module docstring)

BEHAVIOURS = {
    "ideal": ClientBehaviour(False, False, 0.0),
    "vllm-bench": ClientBehaviour(True, False, MEASURED_TURNAROUND_S),
    "guidellm": ClientBehaviour(True, False, MEASURED_TURNAROUND_S),
    "inference-perf": ClientBehaviour(True, False, MEASURED_TURNAROUND_S),
    "aiperf": ClientBehaviour(True, True, MEASURED_TURNAROUND_S),
    "genai-perf": ClientBehaviour(True, True, MEASURED_TURNAROUND_S),
}


def behaviour(client: Client) -> ClientBehaviour:
    """The tool's behaviour with the scenario's own turnaround, if it sets one."""
    base = BEHAVIOURS[client.tool]
    if client.turnaround_s is None:
        return base
    return ClientBehaviour(base.synchronized_start, base.barrier_after_warmup, client.turnaround_s)
