"""Requests waiting for their offloaded KV blocks to come back from host memory (vLLM's
WAITING_FOR_REMOTE_KVS): admission skips them, and they return to the front of the waiting queue, in the
order they left it, once their copy is done (kvcache/offload.py)."""

from __future__ import annotations

from ttftsim.engine.state import RequestState


class LoadingRequests:
    """Requests whose blocks are being copied in, in the order they started. Invariant: each holds GPU
    blocks for its loaded_tokens and has kv_ready_s set."""

    def __init__(self) -> None:
        self.states: list[RequestState] = []

    def __len__(self) -> int:
        return len(self.states)

    def start(self, state: RequestState, tokens: int, ready_s: float) -> None:
        state.loaded_tokens, state.kv_ready_s = tokens, ready_s
        self.states.append(state)

    def done(self, now: float) -> list[RequestState]:
        """Take out the requests whose copy has finished by now, in the order they started."""
        ready = [s for s in self.states if s.kv_ready_s <= now]
        if ready:
            self.states = [s for s in self.states if s.kv_ready_s > now]
        return ready

    def next_done_s(self) -> float | None:
        return min((s.kv_ready_s for s in self.states), default=None)

    def take_all(self) -> list[RequestState]:
        taken, self.states = self.states, []
        return taken

    def expire(self, cutoff_s: float) -> list[RequestState]:
        """Take out the requests that arrived at or before cutoff_s (their client gave up)."""
        gone = [s for s in self.states if s.req.arrival_s <= cutoff_s]
        self.states = [s for s in self.states if s.req.arrival_s > cutoff_s]
        return gone
