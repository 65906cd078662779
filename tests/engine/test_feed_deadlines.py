"""The engine's arrival feed (read a chunk at a time, attached feeds in turn) and its client deadlines (the earliest
of the requests not yet ended)."""

from __future__ import annotations

from collections.abc import Iterator

from ttftsim.engine.deadlines import ClientDeadlines
from ttftsim.engine.feed import FEED_CHUNK, ArrivalFeed
from ttftsim.engine.state import RequestState
from ttftsim.workload.request import Request

from ..factories import request


def test_a_feed_reads_a_chunk_at_a_time_and_a_second_feed_follows_the_first() -> None:
    read: list[int] = []

    def lazy(first: int, count: int) -> Iterator[Request]:
        for i in range(first, first + count):
            read.append(i)
            yield request(i, float(i), 16, 2)

    feed = ArrivalFeed()
    feed.attach(lazy(0, FEED_CHUNK + 1))
    assert len(read) == FEED_CHUNK and feed.next_arrival_s() == 0.0
    feed.attach(lazy(FEED_CHUNK + 1, 2))
    assert len(read) == FEED_CHUNK  # the second feed is read only after the first
    taken = [feed.pop().request_id for _ in range(FEED_CHUNK + 3)]
    assert taken == list(range(FEED_CHUNK + 3))
    assert feed.next_arrival_s() is None and feed.rest is None


def test_a_cleared_feed_has_no_arrival_left() -> None:
    feed = ArrivalFeed()
    feed.attach([request(0, 1.0, 16, 2), request(1, 2.0, 16, 2)])
    feed.clear()
    assert feed.next_arrival_s() is None and not feed.queue and feed.rest is None


def test_the_next_deadline_is_the_earliest_of_the_requests_not_yet_ended() -> None:
    deadlines = ClientDeadlines()
    states = [RequestState(request(i, 0.0, 16, 2)) for i in range(3)]
    for deadline, state in zip((5.0, 3.0, 4.0), states, strict=True):
        deadlines.add(deadline, state)
    assert deadlines.next_s == 3.0
    states[1].status = "finished"
    deadlines.drop_ended()
    assert deadlines.next_s == 4.0
    states[2].status, states[0].status = "aborted", "rejected"
    deadlines.drop_ended()
    assert deadlines.next_s == float("inf")
