"""A request as the client sends it: when, how long its prompt and answer are, and what its prompt is made of."""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.kvcache.hashing import Segment


@dataclass(frozen=True, slots=True)
class Request:
    """One request. `segments` spell out the prompt as (content id, tokens) runs that sum to prompt_tokens;
    requests sharing a content id share those tokens (a system prompt, a conversation's history)."""

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    segments: tuple[Segment, ...]
    priority: int = 0
    session_id: int = -1
    output_content_id: int = -1  # content id of the generated tokens (a later turn's history reuses it)
    private: bool = False  # no other request shares its first content id, so none can share any block
    preloaded_tokens: int = 0  # prompt tokens whose KV arrives from a prefill pod (disaggregated serving)
    lora_id: int = 0  # the LoRA adapter it asks for (1..N); 0 = the base model

    def __post_init__(self) -> None:
        if self.output_content_id == -1:
            object.__setattr__(self, "output_content_id", -(self.request_id + 2))


class ContentIds:
    """Hands out content ids for one run (no global counters): ids are >= 0 and never reused."""

    def __init__(self) -> None:
        self._next = 0

    def new(self) -> int:
        value = self._next
        self._next += 1
        return value

    def reserve(self, count: int) -> int:
        """The first of `count` consecutive new ids (what `count` calls of new() would return)."""
        value = self._next
        self._next += count
        return value
