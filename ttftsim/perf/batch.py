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
        shape = cls()
        for new, ctx in zip(new_tokens, context_tokens, strict=True):
            shape = shape.plus(new, ctx)
        sampled = len(new_tokens) if num_sampled is None else num_sampled
        return shape.with_sampled(sampled)

    def plus(self, new: int, ctx: int) -> BatchShape:
        """This batch with one more sequence of `new` tokens after `ctx` cached ones."""
        if new == 1 and ctx > 0:
            return BatchShape(
                self.num_prefill_seqs,
                self.prefill_tokens,
                self.prefill_attn_pairs,
                self.prefill_kv_tokens,
                self.num_decode_seqs + 1,
                self.decode_kv_tokens + ctx + 1,
                self.num_sampled,
            )
        return BatchShape(
            self.num_prefill_seqs + 1,
            self.prefill_tokens + new,
            self.prefill_attn_pairs + new * ctx + new * (new + 1) // 2,
            self.prefill_kv_tokens + ctx + new,
            self.num_decode_seqs,
            self.decode_kv_tokens,
            self.num_sampled,
        )

    def with_sampled(self, num_sampled: int) -> BatchShape:
        return BatchShape(
            self.num_prefill_seqs,
            self.prefill_tokens,
            self.prefill_attn_pairs,
            self.prefill_kv_tokens,
            self.num_decode_seqs,
            self.decode_kv_tokens,
            num_sampled,
        )
