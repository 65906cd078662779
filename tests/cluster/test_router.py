"""Routers on hand-built replicas: turn order, load, sessions, prefix affinity with GIE's weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from tests.factories import make_engine
from ttftsim.cluster.routing import Router, make_router
from ttftsim.cluster.routing.base import best, least_outstanding
from ttftsim.config.cluster_routing import PrefixAwareRouter, RoundRobinRouter, RouterName
from ttftsim.config.cluster_routing import Router as RouterSpec
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
    return make_router(TypeAdapter(RouterSpec).validate_python({"type": kind}), np.random.default_rng(seed))


def test_round_robin_and_least_outstanding() -> None:
    rr, group = router("round_robin"), pods([0, 0, 0])
    assert [rr.pick(group, req(i), 0.0).index for i in range(5)] == [0, 1, 2, 0, 1]
    assert router("least_outstanding").pick(pods([3, 1, 2]), req(0), 0.0).index == 1
    assert router("least_outstanding").pick(pods([3, 2, 1]), req(0), 0.0).index == 2


def test_least_outstanding_breaks_ties_with_the_runs_generator() -> None:
    # pods 1 and 2 tie at 0 in flight; each pick draws integers(2) from the seeded generator, and
    # default_rng(0) draws 1, 1, 1, 0, 0: the second, second, second, then the first of the tied pair
    lor, group = router("least_outstanding", seed=0), pods([2, 0, 0])
    assert [lor.pick(group, req(i), 0.0).index for i in range(5)] == [2, 2, 2, 1, 1]


@given(st.lists(st.integers(0, 4), min_size=1, max_size=12), st.integers(0, 2**32 - 1))
def test_least_outstanding_picks_and_draws_as_the_highest_of_minus_the_counts(counts: list[int], seed: int) -> None:
    """The one-pass pick is `best` on minus the counts: the same replica, the same draws from the generator."""
    group = pods_without_engines(counts)
    ours, reference = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(3):
        assert least_outstanding(group, ours) is best(group, [-float(p.outstanding) for p in group], reference)
    assert ours.integers(1 << 30) == reference.integers(1 << 30)


def pods_without_engines(outstanding: list[int]) -> list[FakePod]:
    return [FakePod(i, n, None) for i, n in enumerate(outstanding)]


def test_power_of_two_takes_the_less_busy_of_its_pair_and_the_first_drawn_on_a_tie() -> None:
    # default_rng(3).choice(3, size=2, replace=False) draws the pairs (0, 1), (0, 2), (2, 1), (2, 0), (2, 1),
    # (0, 2), (2, 0), (0, 2). Pod 1 (0 in flight) wins each pair it is in; pods 0 and 2 (9 each) tie: the
    # first drawn stays (the second must have strictly fewer in flight to win).
    p2c, group = router("power_of_two", seed=3), pods([9, 0, 9])
    picks = [p2c.pick(group, req(i), 0.0).index for i in range(8)]
    assert picks == [1, 0, 1, 2, 1, 0, 2, 0]


def test_session_affinity_sticks_while_the_replica_lives() -> None:
    sticky, group = router("session_affinity"), pods([0, 5, 3])
    assert sticky.pick(group, req(0, session=42), 0.0).index == 0
    group[0].outstanding = 99
    assert sticky.pick(group, req(1, session=42), 0.0).index == 0
    # pod 0 gone: the session moves to the least loaded of the rest (pod 2, 3 in flight < 5) ...
    assert sticky.pick(group[1:], req(2, session=42), 0.0).index == 2
    # ... and sticks there, even when pod 0 is back and pod 2 is now the busiest
    group[2].outstanding = 50
    assert sticky.pick(group, req(3, session=42), 0.0).index == 2
    # no session: least outstanding (pod 1, 5 in flight)
    assert sticky.pick(group, req(4), 0.0).index == 1


def test_prefix_aware_follows_the_prefix_unless_the_queue_outweighs_it() -> None:
    prefix, group = router("prefix_aware"), pods([0, 0])
    shared = ((1, 160), (2, 32))  # a 160-token system prompt, then a question
    first = prefix.pick(group, req(0, shared), 0.0).index
    assert first == 1  # a tie on empty pods (4 each): default_rng(0)'s first integers(2) is 1
    again = prefix.pick(group, req(1, ((1, 160), (3, 32))), 0.0).index
    # 10 of 12 blocks matched: 2 x 1 (queue) + 2 x 1 (KV) + 3 x 10/12 = 6.5 on pod 1 against 4 on pod 0
    assert again == first
    # a long waiting queue on that pod: queue-scorer 0 there, 1 elsewhere: 0 + 2 + 2.5 = 4.5 > 2 + 2 + 0 = 4
    # still follows...
    engine = group[first].engine
    assert engine is not None
    for i in range(5):
        engine.submit(Request(100 + i, 0.0, 10, 1, ((900 + i, 10),)))
    assert prefix.pick(group, req(2, ((1, 160), (4, 32))), 1.0).index == first
    # ... but a request sharing nothing goes where the queue is short: 2 + 2 = 4 on pod 0 against 0 + 2 = 2
    assert prefix.pick(group, req(3, ((5, 64),)), 1.0).index == 0


def test_pod_metrics_are_those_of_the_last_scrape() -> None:
    """GIE refreshes pod metrics every 50 ms: within an interval the picker scores what it last read."""
    prefix, group = router("prefix_aware"), pods([0, 0])
    prefix.pick(group, req(0, ((50, 64),)), 0.0)  # scraped at t = 0: both queues empty
    engine = group[0].engine
    assert engine is not None
    for i in range(5):
        engine.submit(Request(100 + i, 0.0, 10, 1, ((900 + i, 10),)))
    # requests sharing nothing, 20 ms later: equal (stale) queues, so ties, broken by the seeded generator:
    # default_rng(0)'s integers(2) draws 1 (the pick at t = 0), then 1, 1, 0, 0, 0, 0
    stale = [prefix.pick(group, req(i, ((50 + i, 64),)), 0.02).index for i in range(1, 7)]
    assert stale == [1, 1, 0, 0, 0, 0]
    # after the next scrape (t = 50 ms) the queue on pod 0 is seen: queue-scorer 0 there, 1 on pod 1
    fresh = [prefix.pick(group, req(i, ((50 + i, 64),)), 0.06).index for i in range(40, 46)]
    assert fresh == [1] * 6


def test_kv_aware_takes_the_lowest_scraped_kv_usage() -> None:
    kv, group = router("kv_aware"), pods([0, 0, 0])
    for pod, blocks in zip(group, (300, 100, 200), strict=True):  # of 1000 blocks: usage 0.3, 0.1, 0.2
        engine = pod.engine
        assert engine is not None and engine.kv.allocate(900 + pod.index, 16 * blocks)
    assert kv.pick(group, req(0), 0.0).index == 1
    busy = group[1].engine
    assert busy is not None and busy.kv.allocate(999, 16 * 400)  # pod 1 now at 0.5
    assert kv.pick(group, req(1), 0.04).index == 1  # scraped at t = 0: still 0.1
    assert kv.pick(group, req(2), 0.05).index == 2  # the 50 ms scrape: 0.2 is lowest


def test_each_router_type_builds_its_own_class_from_its_own_section() -> None:
    built = {name: type(router(name)).__name__ for name in get_args(RouterName)}
    assert built == {
        "round_robin": "RoundRobin",
        "least_outstanding": "LeastOutstanding",
        "power_of_two": "PowerOfTwo",
        "session_affinity": "SessionAffinity",
        "prefix_aware": "PrefixAware",
        "kv_aware": "KvAware",
    }
    section = TypeAdapter(RouterSpec)
    assert section.validate_python({}) == RoundRobinRouter()  # no type: round robin, as before the split
    tuned = section.validate_python({"type": "prefix_aware", "queue_weight": 1, "lru_blocks_per_pod": 8})
    assert isinstance(tuned, PrefixAwareRouter) and (tuned.queue_weight, tuned.lru_blocks_per_pod) == (1.0, 8)
    with pytest.raises(ValidationError) as unknown:
        section.validate_python({"type": "random"})
    assert unknown.value.errors()[0]["loc"] == ("type",)  # named as the field, not the whole section
    with pytest.raises(ValidationError) as stray:  # a parameter of another router: an error, not ignored
        section.validate_python({"type": "least_outstanding", "queue_weight": 1})
    assert stray.value.errors()[0]["loc"] == ("least_outstanding", "queue_weight")
