"""Routers on what the gateway itself knows, always current: the turn, its requests in flight per replica,
the replica each session went to (serving-semantics.md part 2)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ttftsim.cluster.routing.base import PodT, Router, least_outstanding
from ttftsim.workload.request import Request


class RoundRobin(Router):
    """The next ready replica in turn (vLLM production-stack's default); the turn counts picks among two
    or more replicas, taken modulo the replicas ready at that pick."""

    def __init__(self) -> None:
        self._turn = 0

    def choose(self, pods: Sequence[PodT], req: Request, now: float) -> PodT:
        chosen = pods[self._turn % len(pods)]
        self._turn += 1
        return chosen


class LeastOutstanding(Router):
    """Fewest requests in flight at the gateway; ties at random."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def choose(self, pods: Sequence[PodT], req: Request, now: float) -> PodT:
        return least_outstanding(pods, self.rng)


class PowerOfTwo(Router):
    """Two distinct replicas drawn at random (one choice(n, 2, replace=False)); the second wins only with
    strictly fewer requests in flight."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def choose(self, pods: Sequence[PodT], req: Request, now: float) -> PodT:
        first, second = self.rng.choice(len(pods), size=2, replace=False)
        a, b = pods[int(first)], pods[int(second)]
        return b if b.outstanding < a.outstanding else a


class SessionAffinity(Router):
    """A session sticks to the replica it was last sent to while that one is ready; requests without a
    session (session_id < 0), and sessions whose replica is gone, go to the least loaded, which the
    session then sticks to."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self._sessions: dict[int, int] = {}

    def choose(self, pods: Sequence[PodT], req: Request, now: float) -> PodT:
        if req.session_id < 0:
            return least_outstanding(pods, self.rng)
        wanted = self._sessions.get(req.session_id)
        for pod in pods:
            if pod.index == wanted:
                return pod
        chosen = least_outstanding(pods, self.rng)
        self._sessions[req.session_id] = chosen.index
        return chosen
