"""Preemption victims are one policy object that every scheduling path asks (engine/preemption.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.factories import feed, make_engine, request
from ttftsim.engine.preemption import LastRunning, LowestPriority
from ttftsim.engine.state import RequestState
from ttftsim.perf.linear import LinearStepModel


def _states(*keys: tuple[int, float]) -> list[RequestState]:
    return [RequestState(request(rid, arrival, 16, 4, priority=prio)) for rid, (prio, arrival) in enumerate(keys)]


def test_fcfs_takes_the_last_running_request() -> None:
    assert LastRunning().victim_index(_states((0, 0.0), (0, 1.0), (0, 2.0))) == 2


def test_priority_takes_the_least_urgent_then_the_latest() -> None:
    # (priority, arrival): the largest is (2, 0.5) at index 1; a tie on priority goes to the later arrival
    assert LowestPriority().victim_index(_states((0, 0.0), (2, 0.5), (1, 3.0))) == 1
    assert LowestPriority().victim_index(_states((1, 0.0), (1, 2.0), (1, 1.0))) == 1


class FirstRunning:
    """A policy no path hard-codes: the first running request is the victim."""

    def __init__(self) -> None:
        self.takes_tail = False
        self.victims: list[int] = []

    def victim_index(self, running: list[RequestState]) -> int:
        self.victims.append(running[0].rid)
        return 0


@pytest.mark.parametrize("cohort", [True, False], ids=["cohort-fast-path", "per-request-loop"])
def test_every_path_preempts_the_policys_victim(cohort: bool) -> None:
    # 8 blocks of 16 tokens: two 48-token prompts take 3 blocks each; their decodes then run out of blocks
    env, engine, recorder = make_engine(num_blocks=8, cost=LinearStepModel(0.01))
    policy = FirstRunning()
    engine.scheduler.preemption = policy
    engine.scheduler.use_cohort = cohort
    feed(env, engine, [request(0, 0.0, 48, 40), request(1, 0.0, 48, 40)])
    env.run()
    rows: dict[int, Any] = {int(r["request_id"]): r for r in recorder.requests_frame().to_dict("records")}
    assert policy.victims and policy.victims[0] == 0  # request 0 runs first, so the policy names it
    assert rows[0]["num_preemptions"] >= 1
    assert rows[1]["num_preemptions"] == 0
    assert all(row["status"] == "finished" for row in rows.values())
