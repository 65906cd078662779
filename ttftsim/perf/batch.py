"""What runs in one engine iteration, reduced to the sums the cost model needs.

A sequence with one new token and a KV context is a decode; any other is a prefill (a whole prompt or a
chunk of one, possibly after a prefix-cache hit). Causal attention of n new tokens after c cached ones
touches n*c + n(n+1)/2 query-key pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BatchShape:
    """Aggregates of one iteration. Invariant: all counts >= 0; decode_kv_tokens >= num_decode_seqs."""

    num_prefill_seqs: int = 0
    prefill_tokens: int = 0
    prefill_attn_pairs: int = 0
    prefill_kv_tokens: int = 0
    num_decode_seqs: int = 0
    decode_kv_tokens: int = 0
    num_sampled: int = 0
    num_spec_tokens: int = 0  # draft tokens verified this step: LM-head rows beyond num_sampled
    num_loras: int = 0  # distinct LoRA adapters in the batch
    lora_load_s: float = 0.0  # copying adapters into GPU slots before the forward pass

    @property
    def num_tokens(self) -> int:
        return self.prefill_tokens + self.num_decode_seqs

    @property
    def is_decode_only(self) -> bool:
        return self.num_prefill_seqs == 0 and self.num_decode_seqs > 0

    @classmethod
    def from_sequences(
        cls, new_tokens: Sequence[int], context_tokens: Sequence[int], num_sampled: int | None = None
    ) -> BatchShape:
        """Build from per-sequence counts. By default every sequence samples a token (a final chunk or
        a decode); pass num_sampled for batches with partial prefill chunks."""
        builder = BatchShapeBuilder()
        for new, ctx in zip(new_tokens, context_tokens, strict=True):
            builder.add(new, ctx, samples=False)
        builder.sampled = len(new_tokens) if num_sampled is None else num_sampled
        return builder.build()


class BatchShapeBuilder:
    """Accumulates a BatchShape sequence by sequence without allocating one object per sequence."""

    __slots__ = ("d_kv", "d_seqs", "p_kv", "p_pairs", "p_seqs", "p_tokens", "sampled", "spec")

    def __init__(self) -> None:
        self.p_seqs = self.p_tokens = self.p_pairs = self.p_kv = self.d_seqs = self.d_kv = self.sampled = 0
        self.spec = 0

    def add(self, new: int, ctx: int, samples: bool) -> None:
        """One sequence with `new` tokens after `ctx` cached ones; one new token after a context is a decode."""
        if new == 1 and ctx > 0:
            self.d_seqs += 1
            self.d_kv += ctx + 1
        else:
            self.p_seqs += 1
            self.p_tokens += new
            self.p_pairs += new * ctx + new * (new + 1) // 2
            self.p_kv += ctx + new
        self.sampled += samples

    def add_verify(self, new: int, ctx: int) -> None:
        """A decoding sequence's token and its new - 1 draft tokens, verified together (speculative
        decoding): attention as a chunk of `new` queries after `ctx`, logits at every position."""
        self.add(new, ctx, samples=True)
        self.spec += new - 1

    def add_decodes(self, seqs: int, kv_tokens: int) -> None:
        self.d_seqs += seqs
        self.d_kv += kv_tokens
        self.sampled += seqs

    def build(self) -> BatchShape:
        return BatchShape(
            self.p_seqs, self.p_tokens, self.p_pairs, self.p_kv, self.d_seqs, self.d_kv, self.sampled, self.spec
        )
