"""When the client first sees content: the scenario's first_visible_token-th output token (1: the first
token, as vLLM's API server sends a chunk for every step with new token ids). A request whose visible token
comes later waits here; a decode cohort's members reach it inside a closed-form run, so the run's iteration
ends are checked before the cohort advances over them.

Compiled with mypyc at install (ttftsim/_native.py), as the engine that uses it.
"""

from __future__ import annotations

from typing import Any

from ttftsim.engine.cohort import DecodeCohort
from ttftsim.engine.state import RequestState


class VisibleTokens:
    """The requests whose visible token is still ahead. Invariant: each has emitted at least one token."""

    def __init__(self, first_visible_token: int) -> None:
        self.first_visible_token = first_visible_token
        self.awaiting: list[RequestState] = []

    def emitted(self, state: RequestState, end_s: float, delay_s: float) -> None:
        """`state` just emitted a token at end_s (num_output already counts it); the API server sends it
        delay_s later."""
        if state.num_output == self.first_visible_token:
            state.visible_s = end_s
            state.output_delay_s = delay_s
        elif state.num_output == 1:  # its visible token comes later, possibly inside the cohort
            self.awaiting.append(state)

    def mark(self, cohort: DecodeCohort, step_ends: Any, delays_s: Any) -> None:
        """Before the cohort advances over iterations ending at step_ends: members reaching their first
        visible token get its time (and the API server's delay in sending that iteration's tokens,
        delays_s)."""
        waiting = []
        for state in self.awaiting:
            if state.visible_s >= 0 or state.status in ("finished", "aborted"):
                continue
            if state.rid not in cohort.members:  # stepping alone for now: the engine's _apply sees its token
                waiting.append(state)
                continue
            ahead = self.first_visible_token - (state.num_output + cohort.clock - state.sync_clock)
            if ahead <= len(step_ends):
                state.visible_s = float(step_ends[ahead - 1])
                state.output_delay_s = float(delays_s[ahead - 1])
            else:
                waiting.append(state)
        self.awaiting = waiting
