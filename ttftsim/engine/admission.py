"""vLLM's admission limits in the API server (vLLM >= 0.29: --max-num-queued-reqs, --max-num-queued-tokens).

AsyncLLM.check_admission (vllm/v1/engine/async_llm.py, read in 0.32.0), run before a response starts
(serving's _preflight) and as the request is added: HTTP 503 when the unfinished requests (the output
processor's, waiting and running, over every data-parallel rank the API server routes to) plus this one would
exceed max_num_queued_reqs, or when the prompt tokens of the unfinished requests still in their prefill (no
output yet; the whole prompt_len, prefix-cache hits and chunks done not subtracted) are at least
max_num_queued_tokens. The request is refused before it is tokenized and never reaches the engine.

Counted here as the engine sees its requests: a request counts from its acceptance to its end (the output
processor drops it once the finishing step's outputs are processed, the API server's output delay later), its
prompt until its first token is sampled. The client's own retry of a 503 is not modelled: the request ends
rejected, with the limit that refused it.
"""

from __future__ import annotations


class Admission:
    """The counts the limits are checked against. Invariant: unfinished and prefill_tokens are those of the
    requests accepted and not ended (prefill_tokens: of those without a first token), summed over the group."""

    __slots__ = ("group", "max_prefill_tokens", "max_requests", "prefill_tokens", "unfinished")

    def __init__(self, max_requests: int | None, max_prefill_tokens: int | None) -> None:
        self.max_requests, self.max_prefill_tokens = max_requests, max_prefill_tokens
        self.unfinished = 0
        self.prefill_tokens = 0
        self.group: list[Admission] = [self]  # the data-parallel ranks behind one API server

    @property
    def active(self) -> bool:
        return self.max_requests is not None or self.max_prefill_tokens is not None

    def refusal(self) -> str:
        """Why the API server answers 503 to a request now ('' when it admits it)."""
        unfinished = sum(member.unfinished for member in self.group)
        if self.max_requests is not None and unfinished + 1 > self.max_requests:
            return f"HTTP 503: {unfinished} unfinished requests, max_num_queued_reqs {self.max_requests}"
        tokens = sum(member.prefill_tokens for member in self.group)
        if self.max_prefill_tokens is not None and tokens >= self.max_prefill_tokens:
            return (
                f"HTTP 503: {tokens} prompt tokens awaiting a first token, max_num_queued_tokens "
                f"{self.max_prefill_tokens}"
            )
        return ""

    def accepted(self, prompt_tokens: int) -> None:
        self.unfinished += 1
        self.prefill_tokens += prompt_tokens

    def first_token(self, prompt_tokens: int) -> None:
        self.prefill_tokens -= prompt_tokens

    def ended(self, prompt_tokens: int, had_first_token: bool) -> None:
        self.unfinished -= 1
        if not had_first_token:
            self.prefill_tokens -= prompt_tokens
