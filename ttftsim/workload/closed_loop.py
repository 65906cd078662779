"""Closed-loop clients as SimPy processes: each client sends a request, waits for its answer, thinks, and
sends the next, until the workload's duration or request budget runs out.

A benchmark tool's own pace is modelled (workload/clients.py): a turnaround each client waits on its own,
and one sending process that sends one request at a time; aiperf's warm-up phase is a barrier every client
waits at. Prompts come from the workload's PromptPool (workload/sources.py); multi-turn chats are
workload/conversations.py.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from ttftsim.config.workload import ClosedLoop, SyntheticWorkload
from ttftsim.workload.sources import PromptPool, Submit, WorkloadContext


class ClientProcess:
    """The load generator's sending process: a client can send `turnaround_s` after the moment it could (a
    response ended, a phase began), each client on its own; the process then sends one request at a time,
    `send_s` each (workload/clients.py)."""

    def __init__(self, turnaround_s: float, send_s: float) -> None:
        self.turnaround_s = turnaround_s
        self.send_s = send_s
        self.free_at = 0.0

    def send_at(self, ready_s: float) -> float:
        self.free_at = max(ready_s + self.turnaround_s, self.free_at) + self.send_s
        return self.free_at


class WarmupBarrier:
    """Counts warm-up requests sent and returned; `open` fires when the last one returns."""

    def __init__(self, env: simpy.Environment, warmup_requests: int) -> None:
        self.left_to_send = warmup_requests
        self.left_to_return = warmup_requests
        self.open = env.event()
        if not warmup_requests:
            self.open.succeed()

    def returned(self) -> None:
        self.left_to_return -= 1
        if self.left_to_return == 0 and not self.open.triggered:
            self.open.succeed()


def closed_loop_client(
    env: simpy.Environment,
    spec: SyntheticWorkload,
    ctx: WorkloadContext,
    submit: Submit,
    budget: list[int],
    prompts: PromptPool,
    sender: ClientProcess | None = None,
    barrier: WarmupBarrier | None = None,
) -> Generator[simpy.Event, Any, None]:
    """One client: send, wait for the answer, think, repeat; stops at duration_s or when budget runs out.
    Each client waits the tool's turnaround on its own, then sends through the tool's one process (ClientProcess),
    one send at a time. With a warm-up barrier, a client whose warm-up share is sent waits for every warm-up
    request to return; then all clients start the measured phase together."""
    loop = spec.arrivals
    assert isinstance(loop, ClosedLoop)
    sender = sender or ClientProcess(0.0, 0.0)
    if loop.ramp_up_s:  # only ideal clients have one (Scenario refuses it for a real tool)
        yield env.timeout(float(ctx.rng.uniform(0.0, loop.ramp_up_s)))
    while (spec.duration_s is None or env.now < spec.duration_s) and budget[0] > 0:
        warming = False
        if barrier is not None:
            if barrier.left_to_send:
                barrier.left_to_send -= 1
                warming = True
            elif not barrier.open.triggered:
                yield barrier.open
                continue
        if sender.turnaround_s or sender.send_s:
            yield env.timeout(sender.send_at(env.now) - env.now)
        budget[0] -= 1
        ctx.sent.add()
        done = env.event()
        submit(prompts.request(env.now), done)
        yield done
        if warming:
            assert barrier is not None
            barrier.returned()
        if loop.think_time_s:
            yield env.timeout(loop.think_time_s)
