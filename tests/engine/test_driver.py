"""The engine's Driver runs a loop's generator as SimPy's Process ran it (the engine's former `_loop`): started by
an urgent event scheduled when it is made, a delay ended in place when nothing precedes it (`advance`) or else at
the time and in the place a Timeout takes, an event waited for as a process waits. Checked here by running the
same waits both ways beside other processes that act at the same instants, and comparing who did what, when."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ttftsim.engine.waits import NORMAL, URGENT, Driver, Wake, advance, wake_at, wake_first

# a wait: ("delay", seconds), ("event", index of a shared event another process triggers), ("first", delay,
# index): the first of a timer and a shared event, as a decode run that a pushed request may cut waits
WAITS = st.lists(
    st.one_of(
        st.tuples(st.just("delay"), st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5])),
        st.tuples(st.just("event"), st.integers(0, 2)),
        st.tuples(st.just("first"), st.sampled_from([0.25, 0.5, 1.0]), st.integers(0, 2)),
    ),
    max_size=12,
)
OTHERS = st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 2.0]), st.integers(0, 2)), max_size=8)


class World:
    """A loop that waits as listed, beside other processes that trigger shared events at given times (half of them
    made before the loop, half after); `log` what each did, when."""

    def __init__(self, waits: list[tuple[Any, ...]], driven: bool) -> None:
        self.env = simpy.Environment()
        self.waits, self.driven = waits, driven
        self.events = [self.env.event() for _ in range(3)]
        self.log: list[tuple[Any, ...]] = []

    def body(self) -> Generator[Any, Any, None]:
        env = self.env
        for step, wait in enumerate(self.waits):
            self.log.append(("loop", step, env.now))
            if wait[0] == "delay":
                yield wait[1]
            elif wait[0] == "event":
                yield self.events[wait[1]]
            elif self.driven:  # the decode run's Wakes
                timer = wake_at(env, env._now + wait[1])
                yield wake_first(env, timer, self.events[wait[2]])
                self.log.append(("cut" if timer.callbacks is not None else "timer", step, env.now))
            else:  # what the engine waited on before: a Timeout, and SimPy's `timer | event`
                timeout = env.timeout(wait[1])
                yield timeout | self.events[wait[2]]
                self.log.append(("cut" if not timeout.processed else "timer", step, env.now))
        self.log.append(("done", env.now))

    def process_loop(self) -> Generator[simpy.Event, Any, None]:
        """The engine's former _loop: a SimPy process over the body's waits."""
        generator = self.body()
        wait = next(generator, None)
        while wait is not None:
            if isinstance(wait, simpy.Event):
                yield wait
            elif not advance(self.env, wait):
                yield self.env.timeout(wait)
            wait = next(generator, None)

    def other(self, at: float, index: int) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(at)
        self.log.append(("other", at, index, self.env.now))
        if not self.events[index].triggered:
            self.events[index].succeed()

    def run(self, others: list[tuple[float, int]]) -> list[tuple[Any, ...]]:
        half = len(others) // 2
        for at, index in others[:half]:
            self.env.process(self.other(at, index))
        if self.driven:
            Driver(self.env, self.body())
        else:
            self.env.process(self.process_loop())
        for at, index in others[half:]:
            self.env.process(self.other(at, index))
        self.env.run(until=10.0)
        return self.log


@settings(max_examples=300, deadline=None)
@given(WAITS, OTHERS)
@example([("delay", 0.5), ("event", 0), ("delay", 0.0)], [(0.0, 0), (0.5, 1)])  # an event processed before its wait
@example([("first", 0.5, 0), ("first", 0.5, 0)], [(0.5, 0)])  # a timer and a push at one instant; then one done
def test_the_driver_waits_as_a_simpy_process_did(waits: list[tuple[Any, ...]], others: list[tuple[float, int]]) -> None:
    assert World(waits, driven=True).run(others) == World(waits, driven=False).run(others)


def test_a_stopped_driver_resumes_nothing() -> None:
    env = simpy.Environment()
    seen: list[float] = []

    def body() -> Generator[Any, Any, None]:
        while True:
            seen.append(env.now)
            yield 1.0

    env.timeout(0.5)  # an event ahead: the delays are not ended in place
    driver = Driver(env, body())
    env.run(until=2.5)
    driver.stop()
    env.run(until=5.0)
    assert seen == [0.0, 1.0, 2.0]


def test_a_wake_is_processed_as_simpy_processes_its_events() -> None:
    env = simpy.Environment()
    wake = wake_at(env, 1.0)
    assert isinstance(wake, Wake) and wake.scheduled and wake.callbacks == []
    env.run()
    assert wake.callbacks is None and env.now == 1.0


def test_the_priorities_are_simpys() -> None:
    assert (URGENT, NORMAL) == (simpy.events.URGENT, simpy.events.NORMAL)


def test_a_driver_stopped_by_its_own_loop_goes_no_further() -> None:
    env = simpy.Environment()
    seen: list[float] = []
    drivers: list[Driver] = []

    def body() -> Generator[Any, Any, None]:
        seen.append(env.now)
        drivers[0].stop()  # the replica lost by what the loop itself did
        yield 1.0
        seen.append(env.now)

    drivers.append(Driver(env, body()))
    env.run(until=0.5)
    assert not any(isinstance(item[3], Wake) for item in env._queue)  # its wait was not scheduled
    env.run(until=5.0)
    assert seen == [0.0]
