"""Open-loop arrivals an engine pulls itself (Engine.attach_feed): known future requests in time order, read
FEED_CHUNK at a time so that a lazy sequence stays lazy (a million requests are not held).

Compiled with mypyc at install (ttftsim/_native.py), as the engine that reads it.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator

from ttftsim.workload.request import Request

FEED_CHUNK = 4096  # arrivals read at a time


class ArrivalFeed:
    """The arrivals not yet taken, in time order: `queue` holds the next ones (empty iff none is left), `rest`
    the later ones still unread (None once read to the end)."""

    def __init__(self) -> None:
        self.queue: deque[Request] = deque()
        self.rest: Iterator[Request] | None = None

    def attach(self, requests: Iterable[Request]) -> None:
        """More arrivals, after those already attached."""
        rest = self.rest
        self.rest = iter(requests) if rest is None else itertools.chain(rest, requests)
        if not self.queue:
            self._refill()

    def _refill(self) -> None:
        rest = self.rest
        if rest is not None:
            self.queue.extend(itertools.islice(rest, FEED_CHUNK))
            if not self.queue:
                self.rest = None

    def next_arrival_s(self) -> float | None:
        """When the next arrival comes (None: no more)."""
        queue = self.queue
        return queue[0].arrival_s if queue else None

    def pop(self) -> Request:
        """The next arrival, taken."""
        req = self.queue.popleft()
        if not self.queue:
            self._refill()
        return req

    def clear(self) -> None:
        """Drop every arrival (the replica is lost)."""
        self.queue.clear()
        self.rest = None
