"""Which driver a workload gets in a run: a conversation workload starts its conversations, a closed-loop
synthetic workload its clients (with the benchmark tool's pace, prompt pool and warm-up barrier), each as
SimPy processes; an open-loop workload's requests are returned for the caller to feed.
"""

from __future__ import annotations

from collections.abc import Sequence

import simpy

from ttftsim.config.scenario import Client
from ttftsim.config.workload import ClosedLoop, ConversationWorkload, SyntheticWorkload, Workload
from ttftsim.workload.clients import behaviour
from ttftsim.workload.closed_loop import ClientProcess, WarmupBarrier, closed_loop_client
from ttftsim.workload.conversations import conversation_starter
from ttftsim.workload.request import Request
from ttftsim.workload.sources import PromptPool, Submit, WorkloadContext, open_loop_requests


def start_workload(
    env: simpy.Environment, workload: Workload, ctx: WorkloadContext, submit: Submit, client: Client | None = None
) -> Sequence[Request] | None:
    """Start the processes of a closed-loop or conversation workload (returns None); for an open-loop
    workload return its requests, which the caller feeds (a source process, or the engine itself)."""
    if isinstance(workload, ConversationWorkload):
        env.process(conversation_starter(env, workload, ctx, submit))
        return None
    if isinstance(workload, SyntheticWorkload) and isinstance(workload.arrivals, ClosedLoop):
        budget = [workload.num_requests if workload.num_requests is not None else 1 << 62]
        client = client or Client()
        tool = behaviour(client)
        prompts = PromptPool(workload, ctx, tool.dataset_entries, tool.sampling)
        warmup = client.warmup_requests if tool.barrier_after_warmup else 0
        barrier = WarmupBarrier(env, warmup) if warmup else None
        sender = ClientProcess(tool.turnaround_s, tool.send_s)
        for _ in range(workload.arrivals.clients):
            env.process(closed_loop_client(env, workload, ctx, submit, budget, prompts, sender, barrier))
        return None
    return open_loop_requests(workload, ctx, client)
