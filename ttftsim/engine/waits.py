"""How an engine waits in SimPy: its loop's waits ended in place when nothing precedes them, a cut decode run's
timer taken back, and the loop driven without SimPy's Process.

The engine loop (engine.py) yields a delay or an event. SimPy would run it as a Process: a timeout object per
delay, an interpreted `_resume` per wake-up (the engine woke some 3.4 times a request in a cluster). Here:

- `advance` ends a delay in the process itself when no other event is due before its end (SimPy would process
  that timeout next); ties go to SimPy.
- `Driver` runs the loop as a Process would: started by an urgent event scheduled when it is made (SimPy's
  Initialize), a delay that cannot end in place scheduled as a Timeout is (now + delay, normal priority, the next
  number of SimPy's own counter), an event waited for by a callback on it. Its events are `Wake`s, a small
  compiled class SimPy's step processes as its own (it reads `callbacks` and `_ok`, nothing else); never hand a
  Wake to SimPy's conditions (AnyOf) or to `run(until=)`, which read more. A deliberate exception to the style
  rules that long-lived actors are SimPy processes and that there is no class per event type, for speed (issue
  #22): the order of every event is SimPy's, and tests/engine/test_driver.py runs random waits both ways beside
  other processes. Where it differs from a Process, no engine is affected: an error raised by the loop leaves
  `env.run` at once (SimPy raises a copy when the process's own event is processed, after the events due at that
  instant); `stop` takes effect at once (SimPy's interrupt is an urgent event: a loop stopped before its start
  would still have run one pass, one stopped from inside its own loop would have raised).
- `wake_first` waits for the first of a decode run's timer and the engine's wake-up event (a pushed request), as
  SimPy's `timer | event` would; `unschedule` takes the timer of a cut run back out of the queue.

These read SimPy's private clock, queue and event counter (`_now`, `_queue`, `_eid`), as its own step, peek and
schedule do. Compiled with mypyc at install (ttftsim/_native.py), as the engine.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Generator
from typing import Any, cast

import simpy

UNSCHEDULE_SCAN = 64  # the longest SimPy queue searched for a cut decode run's timer (unschedule)


def clock(env: simpy.Environment) -> float:
    """env.now, read as its property reads it: the property is a call into interpreted Python (as much as the
    rest of a cheap engine function), the attribute read here a dictionary lookup. The engine reads it some 17
    times a request."""
    now: float = env._now
    return now


def due_now(env: simpy.Environment) -> bool:
    """Whether an event is due at the current instant: env.peek() <= env.now, read as SimPy's peek reads its queue
    (peek is a call into interpreted Python; the engine loop asks after every iteration in a cluster)."""
    queue = env._queue
    due: bool = (queue[0][0] if queue else math.inf) <= env._now  # (peek's infinity when the queue is empty)
    return due


def advance(env: simpy.Environment, delay: float) -> bool:
    """Move the clock `delay` ahead, and say so, when no other event is due before then: SimPy would process a
    timeout of that delay next, so the process may go on at once, with the same result and without the event (its
    object, the queue, the resume: 0.7 us a wait). False when an event is due at or before then (SimPy orders
    ties by when they were scheduled, and a timeout made now would come after it: the caller yields one). The
    sum is the one SimPy's schedule makes."""
    at = env._now + delay  # SimPy's clock and queue read as its step and peek do (its properties are Python calls)
    queue = env._queue
    if delay >= 0 and (not queue or at < queue[0][0]):  # a negative delay: SimPy's timeout refuses it
        env._now = at
        return True
    return False


def unschedule(env: simpy.Environment, timer: object) -> None:
    """Take a timeout nothing waits for any more (a cut decode run's) out of SimPy's queue, rather than let it be
    processed later as a step that does nothing. The queue's order is total (time, priority, then the order of
    scheduling), so the other events are processed in the same order; and a stale timer at the queue's head no
    longer keeps `advance` from ending a wait in the process. Nor does it end the simulation: a run without a
    horizon ends at its last real event, as with pulled arrivals. A long queue (thousands of clients waiting)
    keeps the timer: finding it would cost more than its step."""
    queue = env._queue
    if len(queue) > UNSCHEDULE_SCAN:
        return
    for index, item in enumerate(queue):
        if item[3] is timer:
            last = queue.pop()
            if index < len(queue):
                queue[index] = last
                heapq.heapify(queue)
            return


URGENT, NORMAL = 0, 1  # SimPy's event priorities (simpy.events): a process's start, then every other event


class Wake:
    """What SimPy's step processes for an engine's own waits, without SimPy's event classes (their constructors,
    the scheduling call, `succeed`, all interpreted Python): the step reads `callbacks` (and sets it to None, so
    `callbacks is None` means processed) and `_ok`; nothing in ttftsim hands one to what reads more (SimPy's
    conditions, `run(until=)`). Placed in SimPy's queue as SimPy places its events (time, priority, then the
    order of scheduling from SimPy's own counter)."""

    def __init__(self, callback: Callable[[Any], None] | None = None) -> None:
        self.callbacks: list[Callable[[Any], None]] | None = [] if callback is None else [callback]
        self._ok = True
        self.scheduled = False


def wake_at(
    env: simpy.Environment, at: float, priority: int = NORMAL, callback: Callable[[Any], None] | None = None
) -> Wake:
    """A Wake processed at `at` (a time computed as SimPy computes it: now + delay), after the events scheduled
    before it at that time and priority; `callback` called then."""
    wake = Wake(callback)
    schedule_at(env, at, priority, wake)
    return wake


def schedule_at(env: simpy.Environment, at: float, priority: int, wake: Wake) -> None:
    """Into SimPy's queue as its schedule puts an event: (time, priority, its next event number, the event)."""
    wake.scheduled = True
    queue: list[Any] = env._queue
    heapq.heappush(queue, (at, priority, next(env._eid), wake))


def wake_first(env: simpy.Environment, timer: Wake, wakeup: simpy.Event) -> Wake:
    """first_of for a decode run: a Wake scheduled when the first of its timer and the engine's wake-up event
    is processed (SimPy's order, as first_of's event), without SimPy's event objects."""
    fired = Wake()

    def fire(_event: object) -> None:
        if not fired.scheduled:
            schedule_at(env, env._now, NORMAL, fired)

    on_first(timer, wakeup, fire)
    return fired


def on_first(timer: object, wakeup: object, fire: Callable[[Any], None]) -> None:
    """`fire` called when each of the two is processed (at once for one processed already, as a Condition checks
    it); fire itself acts on the first call only."""
    for event in (timer, wakeup):
        callbacks: list[Any] | None = cast(Any, event).callbacks  # (SimPy declares a list: None once processed)
        if callbacks is None:
            fire(event)
        else:
            callbacks.append(fire)


class Driver:
    """Runs an engine's loop as SimPy would run it as a process, without SimPy's Process: started by an urgent
    Wake scheduled now (SimPy's Initialize), resumed when the event or Wake it waits for is processed (its
    callback, where Process._resume is SimPy's: interpreted Python); a delay ends in place when no other event is
    due before it (`advance`), else a Wake is scheduled now + delay (a Timeout's time, priority and place). A
    waited event already processed resumes it at once, as SimPy's process does. `stop` ends it (the replica is
    lost): what it waits for then resumes nothing, as SimPy's interrupt takes the process's callback off it."""

    def __init__(self, env: simpy.Environment, body: Generator[Any, Any, None]) -> None:
        self.env = env
        self.body = body
        self.alive = True
        self._resume: Callable[[Any], None] = self.resume
        wake_at(env, env._now, URGENT, self._resume)  # as SimPy's Initialize

    def stop(self) -> None:
        self.alive = False

    def resume(self, _event: object) -> None:
        if not self.alive:
            return
        env, body = self.env, self.body
        while True:
            try:
                wait = body.send(None)
            except StopIteration:  # the loop ended (an engine's does not; a test's may)
                self.alive = False
                return
            if not self.alive:  # stopped by what it just did (the replica lost from inside its own loop)
                return
            if isinstance(wait, (Wake, simpy.Event)):
                callbacks: list[Any] | None = cast(Any, wait).callbacks  # (None once processed)
                if callbacks is not None:
                    callbacks.append(self._resume)
                    return
                continue  # processed already
            if advance(env, wait):  # a delay (an int in plain Python: arrival times as given)
                continue
            if wait < 0:
                raise ValueError(f"Negative delay {wait}")  # as SimPy's timeout
            wake_at(env, env._now + wait, NORMAL, self._resume)
            return


def first_of(env: simpy.Environment, timer: simpy.Event, wakeup: simpy.Event) -> simpy.Event:
    """An event processed as `timer | wakeup` is: scheduled when the first of the two is processed, so it
    comes after the events due at that instant, in the same order. Without the Condition's bookkeeping (its
    value, its callbacks removed from the other event), which cost as much as the rest of a decode run;
    the caller tells which came first by `timer.processed`."""
    fired = env.event()

    def fire(_event: object) -> None:
        if not fired.triggered:
            fired.succeed()

    on_first(timer, wakeup, fire)
    return fired
