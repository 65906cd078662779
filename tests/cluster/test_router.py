"""Routers on hand-built replicas: turn order, load, sessions, prefix affinity with GIE's weights."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tests.factories import make_engine
from ttftsim.cluster.router import Router
from ttftsim.config.cluster import Router as RouterSpec
from ttftsim.engine.engine import Engine
from ttftsim.workload.request import Request


@dataclass
class FakePod:
    index: int
    outstanding: int
    engine: Engine | None


def pods(outstanding: list[int]) -> list[FakePod]:
    return [FakePod(i, n, make_engine()[1]) for i, n in enumerate(outstanding)]


def req(rid: int, segments: tuple[tuple[int, int], ...] = ((7, 64),), session: int = -1) -> Request:
    return Request(rid, 0.0, sum(n for _, n in segments), 10, segments, session_id=session)


def router(kind: str, seed: int = 0) -> Router:
    return Router(RouterSpec(type=kind), np.random.default_rng(seed))  # type: ignore[arg-type]


def test_round_robin_and_least_outstanding() -> None:
    rr, group = router("round_robin"), pods([0, 0, 0])
    assert [rr.pick(group, req(i), 0.0).index for i in range(5)] == [0, 1, 2, 0, 1]  # type: ignore[arg-type]
    assert router("least_outstanding").pick(pods([3, 1, 2]), req(0), 0.0).index == 1  # type: ignore[arg-type]


def test_power_of_two_never_picks_the_busiest_of_its_pair() -> None:
    p2c, group = router("power_of_two", seed=3), pods([9, 0, 9])
    picks = [p2c.pick(group, req(i), 0.0).index for i in range(30)]  # type: ignore[arg-type]
    assert picks.count(1) >= 15  # pod 1 wins every pair it is in (2 of 3 pairs)
    assert set(picks) <= {0, 1, 2}


def test_session_affinity_sticks_while_the_replica_lives() -> None:
    sticky, group = router("session_affinity"), pods([0, 5, 5])
    assert sticky.pick(group, req(0, session=42), 0.0).index == 0  # type: ignore[arg-type]
    group[0].outstanding = 99
    assert sticky.pick(group, req(1, session=42), 0.0).index == 0  # type: ignore[arg-type]
    assert sticky.pick(group[1:], req(2, session=42), 0.0).index in (1, 2)  # type: ignore[arg-type]


def test_prefix_aware_follows_the_prefix_unless_the_queue_outweighs_it() -> None:
    prefix, group = router("prefix_aware"), pods([0, 0])
    shared = ((1, 160), (2, 32))  # a 160-token system prompt, then a question
    first = prefix.pick(group, req(0, shared), 0.0).index  # type: ignore[arg-type]
    again = prefix.pick(group, req(1, ((1, 160), (3, 32))), 0.0).index  # type: ignore[arg-type]
    assert again == first  # 10 of 12 blocks matched: 3 x 0.83 beats ties elsewhere
    # a long waiting queue on that pod: queue-scorer 0 there, 1 elsewhere: 2 x 1 < 3 x 0.83 still follows...
    engine = group[first].engine
    assert engine is not None
    for i in range(5):
        engine.submit(Request(100 + i, 0.0, 10, 1, ((900 + i, 10),)))
    assert prefix.pick(group, req(2, ((1, 160), (4, 32))), 1.0).index == first  # type: ignore[arg-type]
    # ... but a request sharing nothing goes where the queue is short
    assert prefix.pick(group, req(3, ((5, 64),)), 1.0).index == 1 - first  # type: ignore[arg-type]


def test_pod_metrics_are_those_of_the_last_scrape() -> None:
    """GIE refreshes pod metrics every 50 ms: within an interval the picker scores what it last read."""
    prefix, group = router("prefix_aware"), pods([0, 0])
    prefix.pick(group, req(0, ((50, 64),)), 0.0)  # scraped at t = 0: both queues empty
    engine = group[0].engine
    assert engine is not None
    for i in range(5):
        engine.submit(Request(100 + i, 0.0, 10, 1, ((900 + i, 10),)))
    # requests sharing nothing, 20 ms later: equal (stale) queues, so ties, broken at random
    stale = {prefix.pick(group, req(i, ((50 + i, 64),)), 0.02).index for i in range(1, 40)}  # type: ignore[arg-type]
    assert stale == {0, 1}
    # after the next scrape (t = 50 ms) the queue on pod 0 is seen
    fresh = {prefix.pick(group, req(i, ((50 + i, 64),)), 0.06).index for i in range(40, 60)}  # type: ignore[arg-type]
    assert fresh == {1}
