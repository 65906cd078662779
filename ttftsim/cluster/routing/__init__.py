"""Gateway routing across ready replicas (serving-semantics.md part 2): one router class per
`cluster.router.type`, each built from its own section of the configuration.

- round_robin, least_outstanding, power_of_two, session_affinity (counts.py): on the gateway's own
  counts, always current;
- kv_aware, prefix_aware (scraped.py): on pod metrics the picker scrapes every metrics_refresh_s.
"""

from __future__ import annotations

from typing import assert_never

import numpy as np

from ttftsim.cluster.routing.base import Routable, Router
from ttftsim.cluster.routing.counts import LeastOutstanding, PowerOfTwo, RoundRobin, SessionAffinity
from ttftsim.cluster.routing.scraped import KvAware, PrefixAware
from ttftsim.config.cluster_routing import (
    KvAwareRouter,
    LeastOutstandingRouter,
    PowerOfTwoRouter,
    PrefixAwareRouter,
    RoundRobinRouter,
    SessionAffinityRouter,
)
from ttftsim.config.cluster_routing import Router as RouterSpec

__all__ = ["Routable", "Router", "make_router"]


def make_router(spec: RouterSpec, rng: np.random.Generator) -> Router:
    """The router a configuration section names; it draws its ties from `rng` (the run's generator)."""
    match spec:
        case RoundRobinRouter():
            return RoundRobin()
        case LeastOutstandingRouter():
            return LeastOutstanding(rng)
        case PowerOfTwoRouter():
            return PowerOfTwo(rng)
        case SessionAffinityRouter():
            return SessionAffinity(rng)
        case KvAwareRouter():
            return KvAware(spec, rng)
        case PrefixAwareRouter():
            return PrefixAware(spec, rng)
        case _:
            assert_never(spec)
