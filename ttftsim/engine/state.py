"""What the engine knows about one request while it serves it."""

from __future__ import annotations

from typing import Literal

from ttftsim.kvcache.hashing import Segment
from ttftsim.workload.request import Request

Status = Literal["waiting", "running", "preempted", "finished", "rejected", "aborted", "failed"]


class RequestState:
    """Progress of one request. Invariant: 0 <= num_computed <= num_tokens = prompt + generated tokens.

    TTFT splits into queue (arrival -> first scheduled), recompute (first scheduled -> last admission,
    when preempted before its first token), prefill (iterations it ran in after its last admission) and
    waiting behind other chunks (the rest, while running but not scheduled)."""

    __slots__ = (
        "admit_seq",
        "cached_tokens",
        "finish_s",
        "first_preempt_s",
        "first_scheduled_s",
        "first_token_s",
        "ingress_s",
        "is_anonymous_kv",
        "kv_ready_s",
        "last_admit_s",
        "loaded_tokens",
        "num_computed",
        "num_inflight",
        "num_output",
        "num_preemptions",
        "output_delay_s",
        "prefill_s",
        "rejected_reason",
        "req",
        "rid",
        "status",
        "submitted_s",
        "sync_clock",
        "visible_s",
        "waiter",
    )

    def __init__(self, req: Request) -> None:
        self.req = req
        self.rid = req.request_id
        self.num_computed = 0
        self.is_anonymous_kv = False  # its new KV blocks are a count, not ids (KVCacheManager.is_anonymous)
        self.num_inflight = 0  # tokens scheduled in pipeline batches still in flight (pipeline parallelism)
        self.num_output = 0
        self.status: Status = "waiting"
        self.first_scheduled_s = -1.0
        self.last_admit_s = -1.0
        self.first_token_s = -1.0
        self.finish_s = -1.0
        self.first_preempt_s = -1.0
        self.num_preemptions = 0
        self.prefill_s = 0.0
        self.cached_tokens = 0
        self.rejected_reason = ""
        self.waiter: object | None = None  # a simpy Event a closed-loop client waits on
        self.admit_seq = -1  # running-list order: admissions append, so order = admission sequence
        self.sync_clock = 0  # decode-cohort clock at which num_computed/num_output were last exact
        self.visible_s = -1.0  # when the client sees the first content (the first_visible_token-th token)
        self.submitted_s = req.arrival_s  # when this engine got it (later than arrival after routing delays)
        self.ingress_s = 0.0  # of which in the API server (parsing, tokenization) before the engine core
        self.output_delay_s = 0.0  # API-server time between emitting the visible token and sending it
        self.loaded_tokens = 0  # prompt tokens whose KV is (being) copied in from the CPU tier
        self.kv_ready_s = -1.0  # when that copy is done

    @property
    def num_tokens(self) -> int:
        return self.req.prompt_tokens + self.num_output

    @property
    def is_decoding(self) -> bool:
        return self.num_output > 0 and self.num_computed == self.num_tokens - 1

    def token_segments(self) -> list[Segment]:
        """Prompt segments, then this request's own generated tokens (a content id no one else has)."""
        segments = list(self.req.segments)
        if self.num_output:
            segments.append((self.req.output_content_id, self.num_output))
        return segments
