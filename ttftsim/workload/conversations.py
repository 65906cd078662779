"""Multi-turn conversations as SimPy processes: conversations start at the workload's arrival times, and
each turn resends the whole history so far (the system prompt, every user message and every answer) plus a
new user message, after the previous answer and a think time.

The history's segments keep their content ids, so a turn's prompt shares its prefix blocks with the turn
before it; the answer's content is the output content id of the request that produced it.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from ttftsim.config.workload import ConversationWorkload
from ttftsim.kvcache.hashing import Segment
from ttftsim.workload.arrivals import arrival_times
from ttftsim.workload.lengths import sample_lengths
from ttftsim.workload.request import Request
from ttftsim.workload.sources import Submit, WorkloadContext


def conversation(
    env: simpy.Environment,
    spec: ConversationWorkload,
    ctx: WorkloadContext,
    submit: Submit,
    session: int,
    system: tuple[Segment, ...],
) -> Generator[simpy.Event, Any, None]:
    """One chat: each turn's prompt is the whole history so far plus a new user message."""
    turns = int(sample_lengths(spec.turns, ctx.rng, 1, ctx.base)[0])
    history: list[Segment] = list(system)
    for turn in range(turns):
        user = int(sample_lengths(spec.user_tokens, ctx.rng, 1, ctx.base)[0])
        output = int(sample_lengths(spec.output_tokens, ctx.rng, 1, ctx.base)[0])
        history.append((ctx.content.new(), user))
        prompt = sum(length for _, length in history)
        answer = ctx.content.new()
        ctx.sent.add()
        done = env.event()
        submit(
            Request(
                next(ctx.request_ids),
                env.now,
                prompt,
                output,
                tuple(history),
                session_id=session,
                output_content_id=answer,
            ),
            done,
        )
        yield done
        history.append((answer, output))
        if turn + 1 < turns:
            yield env.timeout(spec.think_time_s)


def conversation_starter(
    env: simpy.Environment, spec: ConversationWorkload, ctx: WorkloadContext, submit: Submit
) -> Generator[simpy.Event, Any, None]:
    starts = arrival_times(spec.arrivals, ctx.rng, spec.duration_s, spec.num_requests)
    system: tuple[Segment, ...] = ((ctx.content.new(), spec.system_prompt_tokens),) if spec.system_prompt_tokens else ()
    for session, start in enumerate(starts):
        if start > env.now:
            yield env.timeout(float(start) - env.now)
        env.process(conversation(env, spec, ctx, submit, session, system))
