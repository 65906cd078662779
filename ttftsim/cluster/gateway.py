"""The gateway: routes each request to a ready pod (a prefill pod first, when disaggregated), holds
requests while no pod of their pool is ready, retries the requests of a lost pod, and moves a prefilled
request's KV to a decode pod (serving-semantics.md part 2; config.cluster.Disaggregation).

Every request is accounted for: routed to a ready replica (or held while none is ready), then finished,
rejected, aborted by its client (held past the client timeout), failed (its replica was lost and the retry
policy gave up, reason given) or in flight at the horizon. Requests of a lost replica are retried
elsewhere with their original arrival time, so the lost time counts in their TTFT; a disaggregated request
is retried from its prefill. Not modelled: gateway latency, connection limits, request hedging.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import Any

import numpy as np
import simpy

from ttftsim.cluster.pod import Pod
from ttftsim.cluster.routing import make_router
from ttftsim.config.cluster import Cluster
from ttftsim.engine.recorder import Recorder
from ttftsim.engine.state import RequestState
from ttftsim.workload.request import Request

Held = tuple[Request, simpy.Event | None]  # a request and its client's waiter


class Gateway:
    """Routes and retries. Invariants: a request is in `_owner` while a pod's engine holds it (the pod's
    `outstanding` counts those); a disaggregated request is in `_original` (the client's request) from its
    prefill routing until it ends, and in `_prefilled` while its KV is on or on its way to a decode pod."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: Cluster,
        recorder: Recorder,
        rng: np.random.Generator,
        client_timeout_s: float | None,
        on_drained: Callable[[Pod], None],
        activate: Callable[[], None] | None,
    ) -> None:
        self.env, self.spec, self.recorder = env, spec, recorder
        self.client_timeout_s = client_timeout_s
        self.on_drained = on_drained  # a draining pod's last request left
        self.activate = activate  # a request for the serving pool found none ready (scale from zero)
        self.router = make_router(spec.router, rng)
        self.prefill_router = make_router(spec.router, rng)
        self.attempts: dict[int, int] = {}
        self.prefill_done_s: dict[int, float] = {}
        self.kv_transfer_s: dict[int, float] = {}
        self._owner: dict[int, Pod] = {}
        self._held: deque[Held] = deque()
        self._routable: list[Pod] = []
        self._prefill_routable: list[Pod] = []
        self._original: dict[int, Held] = {}  # disaggregated: the client's request
        self._prefilled: set[int] = set()

    # ---- routing ----

    def route(self, req: Request, waiter: simpy.Event | None = None) -> None:
        """Pick a ready pod (a prefill pod first, when disaggregated) or hold the request."""
        prefill = self.spec.disaggregation is not None and req.request_id not in self._prefilled
        pods = self._prefill_routable if prefill else self._routable
        if not pods:
            held = (req, waiter)
            self._held.append(held)
            if self.client_timeout_s is not None:  # the client gives up then, if no pod has taken it by then
                wait = max(0.0, req.arrival_s + self.client_timeout_s - self.env.now)
                callbacks = self.env.timeout(wait).callbacks
                assert callbacks is not None
                callbacks.append(lambda _event: self._give_up(held))
            if not prefill and self.activate is not None:
                self.activate()
            return
        pod = (self.prefill_router if prefill else self.router).pick(pods, req, self.env.now)
        assert pod.engine is not None
        pod.outstanding += 1
        self._owner[req.request_id] = pod
        if prefill:
            self._original[req.request_id] = (req, waiter)
            pod.engine.submit(req.replace(output_tokens=1))
        else:
            pod.engine.submit(req, waiter)

    def refresh(self, pods: list[Pod]) -> None:
        """Which pods take requests now: the ready serving pods and the ready prefill pods."""
        self._routable = [p for p in pods if p.role == "serving" and p.state == "ready"]
        self._prefill_routable = [p for p in pods if p.role == "prefill" and p.state == "ready"]

    def drain(self) -> None:
        """Route held requests whose pool now has a ready pod, in arrival order; the rest keep waiting;
        those held past the client's timeout are aborted."""
        timeout, now = self.client_timeout_s, self.env.now
        held, self._held = self._held, deque()
        for req, waiter in held:
            if timeout is not None and req.arrival_s + timeout <= now:
                self._abort_held(req, waiter)
                continue
            self.route(req, waiter)

    def _give_up(self, held: Held) -> None:
        """A held request's client gave up (client_timeout_s after sending): aborted, unless a pod took it."""
        try:
            self._held.remove(held)
        except ValueError:
            return  # routed (or ended) before its client's deadline
        self._abort_held(*held)

    def _abort_held(self, req: Request, waiter: simpy.Event | None) -> None:
        state = RequestState(req)
        state.waiter = waiter
        state.status = "aborted"
        state.rejected_reason = f"client timeout after {self.client_timeout_s:g} s at the gateway"
        self._original.pop(req.request_id, None)  # disaggregated: its KV came back to no decode pod
        self._prefilled.discard(req.request_id)
        self._record(state, -1, "aborted")

    # ---- what the engines report ----

    def on_end(self, state: RequestState, status: str) -> None:
        """A serving pod is done with a request."""
        pod = self._owner.pop(state.rid, None)
        if pod is None:
            return
        pod.outstanding -= 1
        self._original.pop(state.rid, None)
        if pod.state == "draining" and pod.outstanding == 0:  # after this step: its engine is the caller
            self.on_drained(pod)

    def on_prefill_end(self, state: RequestState, status: str) -> None:
        """A prefill pod is done with a request: send its KV to a decode pod, or end it for the client."""
        pod = self._owner.pop(state.rid, None)
        if pod is None:
            return
        pod.outstanding -= 1
        req, waiter = self._original[state.rid]
        if status == "finished":
            self.prefill_done_s[state.rid] = self.env.now
            self.env.process(self._transfer(req, waiter, req.prompt_tokens * pod.kv_bytes_per_token))
            return
        del self._original[state.rid]
        ended = RequestState(req)
        ended.waiter, ended.status, ended.rejected_reason = waiter, state.status, state.rejected_reason
        self._record(ended, pod.index, status)

    def _transfer(
        self, req: Request, waiter: simpy.Event | None, num_bytes: float
    ) -> Generator[simpy.Event, Any, None]:
        spec = self.spec.disaggregation
        assert spec is not None
        seconds = spec.transfer_s(num_bytes)
        yield self.env.timeout(seconds)
        self.kv_transfer_s[req.request_id] = seconds
        self._prefilled.add(req.request_id)
        self.route(req.replace(preloaded_tokens=max(req.prompt_tokens - 1, 0)), waiter)

    # ---- lost pods ----

    def pod_gone(self, pod: Pod, pods: list[Pod], lost: list[RequestState], reason: str) -> None:
        """A pod left (scaled down, failed): no more routing to it; its requests are retried or failed."""
        self.router.forget(pod.index)
        self.refresh(pods)
        if lost:
            self._retry_or_fail(lost, pod, f"replica {pod.index} {reason}")

    def _retry_or_fail(self, lost: list[RequestState], pod: Pod, reason: str) -> None:
        """Retry from the gateway (from the prefill, when disaggregated) while attempts remain and the
        client saw no token (or the policy retries started requests too); else fail, reason given."""
        policy = self.spec.retry
        for state in lost:
            if self._owner.pop(state.rid, None) is pod:  # off the lost pod's books (the time series' outstanding)
                pod.outstanding -= 1
            attempts = self.attempts.get(state.rid, 1)
            started = state.first_token_s >= 0 and pod.role != "prefill"  # the client saw tokens
            waiter = state.waiter if isinstance(state.waiter, simpy.Event) else None
            req, waiter = self._original.pop(state.rid, (state.req, waiter))  # disaggregated: from the top
            self._prefilled.discard(state.rid)
            if attempts < policy.max_attempts and (not started or policy.retry_started):
                self.attempts[state.rid] = attempts + 1
                self.route(req.replace(preloaded_tokens=0), waiter)
            else:
                if pod.role == "prefill":
                    state = RequestState(req)
                    state.waiter = waiter
                state.status, state.rejected_reason = "failed", f"{reason} (attempt {attempts})"
                self._record(state, pod.index, "failed")

    # ---- the books ----

    @property
    def routable(self) -> list[Pod]:
        """The serving pods that take requests now, in index order."""
        return self._routable

    @property
    def num_held(self) -> int:
        return len(self._held)

    def idle(self) -> bool:
        """No request held, none on a pod and none between pods (a disaggregated request's KV in transfer)."""
        return not self._held and not self._owner and not self._original

    def close(self, pods: list[Pod]) -> None:
        """At the horizon: record what is still in flight, on serving pods, held, prefilling or in transfer."""
        for pod in pods:
            if pod.engine is not None and pod.state in ("ready", "draining") and pod.role != "prefill":
                for state in pod.engine.in_flight():
                    self.recorder.request(state, pod.index, "in_flight")
        unended = [*self._held, *self._original.values()]
        ids = np.array([req.request_id for req, _ in unended], dtype=np.int64)
        recorded = set(ids[np.isin(ids, self.recorder.rows.column_array("request_id"))].tolist()) if unended else set()
        for req, _ in unended:
            if req.request_id not in recorded:
                recorded.add(req.request_id)
                self.recorder.request(RequestState(req.replace(preloaded_tokens=0)), -1, "in_flight")

    def _record(self, state: RequestState, replica: int, status: str) -> None:
        self.recorder.request(state, replica, status)
        if isinstance(state.waiter, simpy.Event) and not state.waiter.triggered:
            state.waiter.succeed(state)
