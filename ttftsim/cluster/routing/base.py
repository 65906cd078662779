"""What every gateway router shares: the replicas it picks from, the pick with its one-replica shortcut,
and ties broken with the run's seeded generator (one integers(k) draw per tie of k)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

from ttftsim.engine.data_parallel import ServingEngine
from ttftsim.workload.request import Request


class Routable(Protocol):
    """A ready replica as the gateway sees it: its index, its requests in flight, its engine."""

    index: int
    outstanding: int
    engine: ServingEngine | None


PodT = TypeVar("PodT", bound=Routable)


class Router:
    """Picks one of the ready replicas for a request; each router implements `choose`. With a single
    replica there is nothing to choose: it is taken without a draw or any bookkeeping (a router that learns
    from every pick overrides `pick`)."""

    def pick(self, pods: Sequence[PodT], req: Request, now: float) -> PodT:
        if len(pods) == 1:
            return pods[0]
        return self.choose(pods, req, now)

    def choose(self, pods: Sequence[PodT], req: Request, now: float) -> PodT:
        """The pick among two or more replicas."""
        raise NotImplementedError

    def forget(self, pod_index: int) -> None:
        """A replica left (routers that keep per-replica state drop it)."""


def best(pods: Sequence[PodT], values: Sequence[float], rng: np.random.Generator) -> PodT:
    """The replica with the highest value; a tie of k goes to the rng.integers(k)-th of them."""
    top = max(values)
    tied = [p for p, v in zip(pods, values, strict=True) if v == top]
    return tied[int(rng.integers(len(tied)))] if len(tied) > 1 else tied[0]


def least_outstanding(pods: Sequence[PodT], rng: np.random.Generator) -> PodT:
    """Fewest requests in flight at the gateway; ties at random (as `best` on minus the counts: the tied in
    the same order, the same draw), in one pass: the gateway routes every request through it."""
    fewest, tied = pods[0].outstanding, [pods[0]]
    for pod in pods[1:]:
        count = pod.outstanding
        if count < fewest:
            fewest, tied = count, [pod]
        elif count == fewest:
            tied.append(pod)
    return tied[int(rng.integers(len(tied)))] if len(tied) > 1 else tied[0]
