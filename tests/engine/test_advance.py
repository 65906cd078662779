"""`advance` moves SimPy's clock itself only when SimPy would process that timeout next: strictly before every
event already scheduled (a tie goes to the event scheduled first), and to the time SimPy's own sum gives."""

from __future__ import annotations

from collections.abc import Generator

import simpy

from tests.factories import make_engine, request
from ttftsim.engine.waits import advance, clock, unschedule


def test_a_delay_before_every_scheduled_event_moves_the_clock_and_a_tie_does_not() -> None:
    env = simpy.Environment()
    env.timeout(5.0)
    assert advance(env, 3.0) and clock(env) == env.now == 3.0
    assert not advance(env, 2.0) and env.now == 3.0  # at 5.0 with the event scheduled there first: SimPy's turn
    assert not advance(env, 2.5) and env.now == 3.0
    env.run()
    assert env.now == 5.0 and advance(env, 0.1) and env.now == 5.0 + 0.1  # nothing left: the clock moves


def test_the_clock_stops_before_the_horizon_of_a_run_as_simpy_would() -> None:
    env = simpy.Environment()
    seen: list[float] = []

    def process() -> object:
        while True:
            if not advance(env, 0.3):
                yield env.timeout(0.3)
            seen.append(env.now)

    env.process(process())
    env.run(until=1.0)
    reference = simpy.Environment()

    def stepped() -> object:
        while True:
            yield reference.timeout(0.3)
            seen.append(-reference.now)

    reference.process(stepped())
    reference.run(until=1.0)
    assert [t for t in seen if t >= 0] == [-t for t in seen if t < 0] and env.now == reference.now == 1.0
    assert len([t for t in seen if t >= 0]) == 3


def test_an_unscheduled_timer_never_fires_and_the_other_events_keep_their_order() -> None:
    """unschedule takes a timeout out of SimPy's queue: the rest are processed as they would have been (ties in
    the order they were scheduled), and `advance` is no longer held back by the stale timer at the head."""
    env = simpy.Environment()
    fired: list[str] = []
    events = {name: env.timeout(at) for name, at in (("a", 1.0), ("stale", 0.5), ("b", 1.0), ("c", 0.7), ("d", 2.0))}
    for name, event in events.items():
        callbacks = event.callbacks
        assert callbacks is not None
        callbacks.append(lambda _event, name=name: fired.append(name))
    unschedule(env, events["stale"])
    assert advance(env, 0.6) and env.now == 0.6  # the stale timer at 0.5 would have held the clock back
    unschedule(env, events["stale"])  # not in the queue any more: nothing happens
    env.run()
    assert fired == ["c", "a", "b", "d"] and env.now == 2.0


def test_a_decode_run_cut_by_a_pushed_request_leaves_no_timer_in_the_queue() -> None:
    """A request pushed in the middle of a closed-form decode run cuts it: the run's timer (its planned end) leaves
    SimPy's queue at once, rather than firing later as a step that does nothing."""
    env, engine, _ = make_engine()
    engine.submit(request(0, 0.0, 16, 200))
    env.run(until=0.2)
    run = engine._run
    assert run is not None  # decoding in a closed-form run
    planned_end = run.start_s + float(run.times.ends[-1])
    assert planned_end > 0.25 and any(item[0] == planned_end for item in env._queue)

    def push() -> Generator[simpy.Event, None, None]:
        yield env.timeout(0.05)
        engine.submit(request(1, env.now, 16, 8))

    env.process(push())
    env.run(until=0.2501)  # the push at 0.25 has cut the run: the iteration in progress ends, then B is scheduled
    assert engine.scheduler.num_waiting == 1
    assert all(item[0] != planned_end for item in env._queue)
