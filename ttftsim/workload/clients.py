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

Between a response and the next send, two measured costs (benchmarks/vllm_cpu/compare_serve.py, serve_runs/,
2 cores, the client pinned to one): the turnaround, a latency each client waits on its own (the median gap between
a response's end and the next send in the tool's closed-loop records against the real vLLM server), and the
send, the tool's own work per request in its one sending process, one send at a time (the median gap between
consecutive sends of a burst, sends under 2 ms apart). vllm-bench runs every client as a coroutine of one asyncio
process (vllm/benchmarks/serve.py): its 0.32 ms gap is that loop's work, a send. GuideLLM 0.8.1 runs one worker
process per stream (scheduler/strategies.py ConcurrentStrategy.processes_limit = streams, at most
settings.max_worker_processes = 10, scheduler/worker_group.py; beyond 10 streams several share a process, still
modelled side by side): each stream waits 10.6 ms on its own. aiperf 0.13 hands each client a credit from its
timing manager to a worker process over ZMQ (timing/, workers/; one worker on a 2-core host,
workers/worker_manager.py: max(1, int(cpu_count x factor) - 1), more on a larger host, each sending its own
credits, where the one sending process modelled here is pessimistic by a quarter ms a client): 7.0 ms of credit
round trip per client (the measured gap, the send included: 0.25 ms counted twice), and its worker sends a burst
of credits 0.25 ms apart (the device-core runs of serve_runs/, 0.21-0.35 ms). Until 2026-12-04 every tool's
turnaround was charged as a send, one after another (c clients of GuideLLM or aiperf finishing together went out
10.6 or 7.0 ms apart); their records show bursts 0.2-2 ms apart.
genai-perf was not run and takes aiperf's figures (its successor shares the design); inference-perf takes
vllm-bench's (its open loop sends on its own timer, not after a response; run here open loop only,
benchmarks/vllm_cpu/inference_perf_run.py). A scenario can set its own.

Prompts of a synthetic workload: aiperf and genai-perf generate a dataset of --num-dataset-entries
prompts (default 100: aiperf 0.13 config/dataset/defaults.py NUM_DATASET_ENTRIES; genai-perf
inputs/input_constants.py DEFAULT_NUM_DATASET_ENTRIES) and cycle through it for as many requests as asked,
warm-up included: aiperf 0.13 with one ShuffleSampler for both phases (dataset/dataset_samplers.py: every
entry once in random order, then a new order; timing/phase_orchestrator.py; `--dataset-sampling-strategy
shuffle`, its default), genai-perf in order (`sequential`). aiperf 0.1 (October 2025) had no such option: its
DatasetManager._return_any_conversation drew every request's entry with random.choice over the dataset,
uniformly with replacement (`random`, kept by later releases as a choice), so a repeat can come before the
dataset is used up: of 12c draws from 12c entries about 37% repeat an earlier one. Request 101 (or that
repeat) sends a prompt whose blocks vLLM's prefix cache (on by default) may still hold. vllm-bench's
random dataset, inference-perf's random data and guidellm's synthetic data make one prompt per request.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ttftsim.config.scenario import Client, DatasetSampling


@dataclass(frozen=True)
class ClientBehaviour:
    """What differs between tools once their clients start together (every real tool does; only ideal
    clients spread over a ramp, which Scenario allows for them alone)."""

    barrier_after_warmup: bool  # the measured phase starts when every warm-up request has returned
    turnaround_s: float  # response end -> the client can send, each client on its own
    send_s: float  # the sending process's work per request, one send at a time
    dataset_entries: int | None = None  # distinct synthetic prompts cycled through; None: one per request
    sampling: DatasetSampling = "sequential"  # how each request's entry is picked (module docstring)


VLLM_BENCH_SEND_S = 0.00032  # measured (module docstring)
GUIDELLM_TURNAROUND_S = 0.0106  # measured
AIPERF_TURNAROUND_S = 0.0070  # measured
AIPERF_SEND_S = 0.00025  # measured
AIPERF_DATASET_ENTRIES = 100  # aiperf and genai-perf --num-dataset-entries default (module docstring)

BEHAVIOURS = {
    "ideal": ClientBehaviour(False, 0.0, 0.0),
    "vllm-bench": ClientBehaviour(False, 0.0, VLLM_BENCH_SEND_S),
    "guidellm": ClientBehaviour(False, GUIDELLM_TURNAROUND_S, 0.0),
    "inference-perf": ClientBehaviour(False, 0.0, VLLM_BENCH_SEND_S),
    "aiperf": ClientBehaviour(True, AIPERF_TURNAROUND_S, AIPERF_SEND_S, AIPERF_DATASET_ENTRIES, sampling="shuffle"),
    "genai-perf": ClientBehaviour(True, AIPERF_TURNAROUND_S, AIPERF_SEND_S, AIPERF_DATASET_ENTRIES),
}


def behaviour(client: Client) -> ClientBehaviour:
    """The tool's behaviour with the scenario's own turnaround, send, dataset size and sampling, where it sets
    them."""
    base = BEHAVIOURS[client.tool]
    turnaround = base.turnaround_s if client.turnaround_s is None else client.turnaround_s
    send = base.send_s if client.send_s is None else client.send_s
    entries = client.dataset_entries
    if entries is None:
        entries = base.dataset_entries
    elif entries == "unique":
        entries = None
    sampling = base.sampling if client.dataset_sampling is None else client.dataset_sampling
    return replace(base, turnaround_s=turnaround, send_s=send, dataset_entries=entries, sampling=sampling)
