"""A request as the client sends it: when, how long its prompt and answer are, and what its prompt is made of."""

from __future__ import annotations

from typing import Any, Final

from ttftsim.kvcache.hashing import Segment

FIELDS = (
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "segments",
    "priority",
    "session_id",
    "output_content_id",
    "private",
    "preloaded_tokens",
    "lora_id",
)


class Request:
    """One request. `segments` spell out the prompt as (content id, tokens) runs that sum to prompt_tokens;
    requests sharing a content id share those tokens (a system prompt, a conversation's history).

    Immutable (every attribute Final, checked by mypy; `replace` makes a changed copy), equal and hashed by its
    fields, as a frozen dataclass is. A plain class, not a frozen dataclass: one is made for every request (a
    fleet's day has 4.3 million), and under mypyc a frozen dataclass's generated __init__ runs as interpreted
    Python, setting each field through object.__setattr__ (1.5 us a request, about 5% of a replica's
    simulation); this one is compiled (see BatchShape)."""

    def __init__(  # noqa: PLR0913 (one argument per field, as a dataclass's)
        self,
        request_id: int,
        arrival_s: float,
        prompt_tokens: int,
        output_tokens: int,
        segments: tuple[Segment, ...],
        priority: int = 0,
        session_id: int = -1,
        output_content_id: int = -1,
        private: bool = False,
        preloaded_tokens: int = 0,
        lora_id: int = 0,
    ) -> None:
        self.request_id: Final = request_id
        self.arrival_s: Final = arrival_s
        self.prompt_tokens: Final = prompt_tokens
        self.output_tokens: Final = output_tokens
        self.segments: Final = segments
        self.priority: Final = priority
        self.session_id: Final = session_id
        # content id of the generated tokens (a later turn's history reuses it)
        self.output_content_id: Final = output_content_id if output_content_id != -1 else -(request_id + 2)
        self.private: Final = private  # no other request shares its first content id, so none can share any block
        self.preloaded_tokens: Final = preloaded_tokens  # prompt tokens whose KV arrives from a prefill pod
        self.lora_id: Final = lora_id  # the LoRA adapter it asks for (1..N); 0 = the base model

    def fields(self) -> tuple[Any, ...]:
        """Every field's value, in FIELDS order (equality, hash, repr, pickling, replace: none is on a hot path)."""
        return tuple(getattr(self, name) for name in FIELDS)

    def replace(self, **changes: Any) -> Request:
        """A copy with some fields changed, as dataclasses.replace makes one (output_content_id is copied too)."""
        unknown = set(changes) - set(FIELDS)
        if unknown:
            raise TypeError(f"Request has no field {sorted(unknown)[0]!r}")
        return Request(**(dict(zip(FIELDS, self.fields(), strict=True)) | changes))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Request):
            return NotImplemented
        return self.fields() == other.fields()

    def __hash__(self) -> int:
        return hash(self.fields())

    def __repr__(self) -> str:
        return "Request(" + ", ".join(f"{n}={v!r}" for n, v in zip(FIELDS, self.fields(), strict=True)) + ")"

    def __reduce__(self) -> tuple[type[Request], tuple[Any, ...]]:
        return (Request, self.fields())


def synthetic_requests(
    first_id: int,
    first_content: int,
    shared: tuple[Segment, ...],
    times: list[float],
    prompts: list[int],
    outputs: list[int],
    priorities: list[int],
) -> list[Request]:
    """A synthetic open loop's requests from their drawn columns: the i-th has id first_id + i and prompt
    content first_content + i after the shared prefix, if any (then it is not private). Here, compiled, rather
    than a request at a time in the workload's interpreted generator."""
    shared_tokens = shared[0][1] if shared else 0
    private = not shared
    return [
        Request(first_id + i, t, shared_tokens + p, o, (*shared, (first_content + i, p)), prio, private=private)
        for i, (t, p, o, prio) in enumerate(zip(times, prompts, outputs, priorities, strict=True))
    ]


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
