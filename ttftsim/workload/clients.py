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

Turnaround (response end -> next send through the tool's one process): the median gap between a response's
end and the next send in the tools' own closed-loop records against the real vLLM server on this machine
kind (benchmarks/vllm_cpu/compare_serve.py, serve_runs/, 2 cores, the client pinned to one): vllm-bench
0.32 ms, GuideLLM 0.8.1 10.6 ms, aiperf 0.13 7.0 ms. genai-perf was not run and takes aiperf's figure (its
successor shares the design); inference-perf takes vllm-bench's (its open loop sends on its own timer, not
after a response; run here open loop only, benchmarks/vllm_cpu/inference_perf_run.py). A scenario can set
its own.

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
    turnaround_s: float  # response end -> next send
    dataset_entries: int | None = None  # distinct synthetic prompts cycled through; None: one per request
    sampling: DatasetSampling = "sequential"  # how each request's entry is picked (module docstring)


VLLM_BENCH_TURNAROUND_S = 0.00032  # measured (module docstring)
GUIDELLM_TURNAROUND_S = 0.0106  # measured
AIPERF_TURNAROUND_S = 0.0070  # measured
AIPERF_DATASET_ENTRIES = 100  # aiperf and genai-perf --num-dataset-entries default (module docstring)

BEHAVIOURS = {
    "ideal": ClientBehaviour(False, 0.0),
    "vllm-bench": ClientBehaviour(False, VLLM_BENCH_TURNAROUND_S),
    "guidellm": ClientBehaviour(False, GUIDELLM_TURNAROUND_S),
    "inference-perf": ClientBehaviour(False, VLLM_BENCH_TURNAROUND_S),
    "aiperf": ClientBehaviour(True, AIPERF_TURNAROUND_S, AIPERF_DATASET_ENTRIES, sampling="shuffle"),
    "genai-perf": ClientBehaviour(True, AIPERF_TURNAROUND_S, AIPERF_DATASET_ENTRIES),
}


def behaviour(client: Client) -> ClientBehaviour:
    """The tool's behaviour with the scenario's own turnaround, dataset size and sampling, where it sets them."""
    base = BEHAVIOURS[client.tool]
    turnaround = base.turnaround_s if client.turnaround_s is None else client.turnaround_s
    entries = client.dataset_entries
    if entries is None:
        entries = base.dataset_entries
    elif entries == "unique":
        entries = None
    sampling = base.sampling if client.dataset_sampling is None else client.dataset_sampling
    return replace(base, turnaround_s=turnaround, dataset_entries=entries, sampling=sampling)
