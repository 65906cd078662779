"""Waiting-queue orders and preemption victims: the policies the scheduler is given (FCFS, priority).

FCFS: arrival order; a preempted request goes back to the front; the victim is the last running request.
Priority: lowest (priority, arrival) first; the victim is the running request with the highest
(priority, arrival), as vLLM's priority policy.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Protocol

from ttftsim.engine.state import RequestState


class WaitingQueue(Protocol):
    def __len__(self) -> int: ...
    def add(self, state: RequestState) -> None: ...
    def prepend(self, state: RequestState) -> None: ...
    def peek(self) -> RequestState: ...
    def pop(self) -> RequestState: ...
    def victim_index(self, running: list[RequestState]) -> int: ...


class FcfsQueue:
    def __init__(self) -> None:
        self._items: deque[RequestState] = deque()

    def __len__(self) -> int:
        return len(self._items)

    def add(self, state: RequestState) -> None:
        self._items.append(state)

    def prepend(self, state: RequestState) -> None:
        self._items.appendleft(state)

    def peek(self) -> RequestState:
        return self._items[0]

    def pop(self) -> RequestState:
        return self._items.popleft()

    def victim_index(self, running: list[RequestState]) -> int:
        return len(running) - 1


class PriorityQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[int, float, int, RequestState]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, state: RequestState) -> None:
        heapq.heappush(self._heap, (state.req.priority, state.req.arrival_s, state.rid, state))

    def prepend(self, state: RequestState) -> None:
        self.add(state)

    def peek(self) -> RequestState:
        return self._heap[0][3]

    def pop(self) -> RequestState:
        return heapq.heappop(self._heap)[3]

    def victim_index(self, running: list[RequestState]) -> int:
        keys = [(s.req.priority, s.req.arrival_s, s.rid) for s in running]
        return max(range(len(running)), key=keys.__getitem__)


def make_queue(policy: str) -> WaitingQueue:
    return PriorityQueue() if policy == "priority" else FcfsQueue()
