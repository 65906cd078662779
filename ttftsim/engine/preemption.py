"""Preemption victims: which running request gives up its KV blocks when an allocation fails (vLLM v1
core/sched/scheduler.py `schedule`: FCFS pops the last running request; the priority policy takes the
running request with the largest (priority, arrival)). Every scheduling path asks the same object."""

from __future__ import annotations

from typing import Protocol

from ttftsim.engine.state import RequestState


class PreemptionPolicy(Protocol):
    takes_tail: bool  # the victim is always the last running request (the fast path may then decide)

    def victim_index(self, running: list[RequestState]) -> int: ...


class LastRunning:
    """FCFS: the request admitted last."""

    def __init__(self) -> None:
        self.takes_tail = True

    def victim_index(self, running: list[RequestState]) -> int:
        return len(running) - 1


class LowestPriority:
    """Priority: the largest (priority, arrival, id), i.e. the least urgent, latest request."""

    def __init__(self) -> None:
        self.takes_tail = False

    def victim_index(self, running: list[RequestState]) -> int:
        keys = [(s.req.priority, s.req.arrival_s, s.rid) for s in running]
        return max(range(len(running)), key=keys.__getitem__)


def make_preemption(policy: str) -> PreemptionPolicy:
    return LowestPriority() if policy == "priority" else LastRunning()
