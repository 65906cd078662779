"""Client timeouts: each request's deadline (sent + client_timeout_s), the earliest first. The engine aborts a
request whose client gave up at its first schedule at or after the deadline (engine.py `expire_clients`).

Compiled with mypyc at install (ttftsim/_native.py), as the engine that reads it.
"""

from __future__ import annotations

import heapq
import math

from ttftsim.engine.state import RequestState

ENDED = ("finished", "rejected", "aborted", "failed")


class ClientDeadlines:
    """Deadlines of requests submitted to the engine; `next_s` is the earliest of those not yet ended (inf:
    none), kept exact by `drop_ended` after each expiry."""

    def __init__(self) -> None:
        self.next_s = math.inf
        self._heap: list[tuple[float, int, RequestState]] = []

    def add(self, deadline: float, state: RequestState) -> None:
        heapq.heappush(self._heap, (deadline, state.req.request_id, state))
        self.next_s = min(self.next_s, deadline)

    def drop_ended(self) -> None:
        """Forget the requests that ended (expired or otherwise) from the front."""
        heap = self._heap
        while heap and heap[0][2].status in ENDED:
            heapq.heappop(heap)
        self.next_s = heap[0][0] if heap else math.inf
