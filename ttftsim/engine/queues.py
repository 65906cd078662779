"""Waiting-queue orders, the policy the scheduler is given (FCFS, priority); victims: engine/preemption.py.

FCFS: arrival order; a preempted request goes back to the front.
Priority: lowest (priority, arrival) first, as vLLM's priority policy.
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


def make_queue(policy: str) -> WaitingQueue:
    return PriorityQueue() if policy == "priority" else FcfsQueue()


def pop_all(queue: WaitingQueue) -> list[RequestState]:
    """Empty the queue, in its order."""
    states: list[RequestState] = []
    while len(queue):
        states.append(queue.pop())
    return states
