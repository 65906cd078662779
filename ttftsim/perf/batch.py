"""What runs in one engine iteration, reduced to the sums the cost model needs.

A sequence with one new token and a KV context is a decode; any other is a prefill (a whole prompt or a
chunk of one, possibly after a prefix-cache hit). Causal attention of n new tokens after c cached ones
touches n*c + n(n+1)/2 query-key pairs.

Sliding-window layers (perf/attention.py): each query sees itself and the window - 1 tokens before it (vLLM
0.15.1 v1/attention/backends/flash_attn.py FlashAttentionImpl: window_size = (sliding_window - 1, 0)). A
builder given the window sums each sequence's windowed pairs and keys exactly; a decode cohort's reads come as
one total (add_decodes), bounded by window keys per sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final


class BatchShape:
    """Aggregates of one iteration. Invariant: all counts >= 0; decode_kv_tokens >= num_decode_seqs.

    Immutable (every attribute Final, checked by mypy). A plain class, not a frozen dataclass: one is built
    every iteration, and under mypyc a dataclass's generated __init__ runs as interpreted Python (4.6 us
    here; with StepPlan's and RunTimes' it was 13% more instructions per run, docs/performance.md), where
    this one is compiled."""

    def __init__(  # noqa: PLR0913 (one argument per field, as a dataclass's)
        self,
        num_prefill_seqs: int = 0,
        prefill_tokens: int = 0,
        prefill_attn_pairs: int = 0,
        prefill_kv_tokens: int = 0,
        num_decode_seqs: int = 0,
        decode_kv_tokens: int = 0,
        num_sampled: int = 0,
        num_spec_tokens: int = 0,
        num_loras: int = 0,
        lora_load_s: float = 0.0,
        window: int = 0,
        prefill_window_pairs: int = 0,
        prefill_window_kv_tokens: int = 0,
        decode_window_kv_tokens: int = 0,
        dp_tokens: int = 0,
    ) -> None:
        self.num_prefill_seqs: Final = num_prefill_seqs
        self.prefill_tokens: Final = prefill_tokens
        self.prefill_attn_pairs: Final = prefill_attn_pairs
        self.prefill_kv_tokens: Final = prefill_kv_tokens
        self.num_decode_seqs: Final = num_decode_seqs
        self.decode_kv_tokens: Final = decode_kv_tokens
        self.num_sampled: Final = num_sampled
        self.num_spec_tokens: Final = num_spec_tokens  # draft tokens verified: LM-head rows beyond num_sampled
        self.num_loras: Final = num_loras  # distinct LoRA adapters in the batch
        self.lora_load_s: Final = lora_load_s  # copying adapters into GPU slots before the forward pass
        self.window: Final = window  # the sliding window the three sums below were counted for (0: none counted)
        self.prefill_window_pairs: Final = prefill_window_pairs  # query-key pairs of the prefills in such a layer
        self.prefill_window_kv_tokens: Final = prefill_window_kv_tokens  # keys the prefills read there
        self.decode_window_kv_tokens: Final = decode_window_kv_tokens  # cached tokens the decodes read there
        # the most tokens any data-parallel rank runs this step: vLLM pads every rank's batch to it
        # (v1/worker/dp_utils.py coordinate_batch_across_dp), so the linears and experts run that many (0: no DP)
        self.dp_tokens: Final = dp_tokens

    @property
    def num_tokens(self) -> int:
        return self.prefill_tokens + self.num_decode_seqs

    def with_dp_tokens(self, dp_tokens: int) -> BatchShape:
        """This batch padded, for its dense layers, to the largest data-parallel rank's token count."""
        return BatchShape(
            self.num_prefill_seqs,
            self.prefill_tokens,
            self.prefill_attn_pairs,
            self.prefill_kv_tokens,
            self.num_decode_seqs,
            self.decode_kv_tokens,
            self.num_sampled,
            self.num_spec_tokens,
            self.num_loras,
            self.lora_load_s,
            self.window,
            self.prefill_window_pairs,
            self.prefill_window_kv_tokens,
            self.decode_window_kv_tokens,
            dp_tokens,
        )

    @property
    def is_decode_only(self) -> bool:
        return self.num_prefill_seqs == 0 and self.num_decode_seqs > 0

    @classmethod
    def from_sequences(
        cls,
        new_tokens: Sequence[int],
        context_tokens: Sequence[int],
        num_sampled: int | None = None,
        window: int = 0,
    ) -> BatchShape:
        """Build from per-sequence counts. By default every sequence samples a token (a final chunk or
        a decode); pass num_sampled for batches with partial prefill chunks, and a window to count the
        windowed sums exactly."""
        builder = BatchShapeBuilder(window)
        for new, ctx in zip(new_tokens, context_tokens, strict=True):
            builder.add(new, ctx, samples=False)
        builder.sampled = len(new_tokens) if num_sampled is None else num_sampled
        return builder.build()


def window_pairs(new: int, ctx: int, window: int) -> int:
    """Query-key pairs of `new` queries after `ctx` cached tokens when each query sees at most `window` keys:
    the sum over positions p = ctx .. ctx + new - 1 of min(p + 1, window)."""
    first, last = ctx + 1, ctx + new
    if last <= window:
        return new * ctx + new * (new + 1) // 2
    if first >= window:
        return new * window
    return (first + window) * (window - first + 1) // 2 + (last - window) * window


class BatchShapeBuilder:
    """Accumulates a BatchShape sequence by sequence without allocating one object per sequence; with a
    window (> 0), the windowed sums too."""

    __slots__ = (
        "d_kv",
        "d_seqs",
        "p_kv",
        "p_pairs",
        "p_seqs",
        "p_tokens",
        "sampled",
        "spec",
        "w_dkv",
        "w_pairs",
        "w_pkv",
        "window",
    )

    def __init__(self, window: int = 0) -> None:
        self.p_seqs = self.p_tokens = self.p_pairs = self.p_kv = self.d_seqs = self.d_kv = self.sampled = 0
        self.spec = 0
        self.window = window
        self.w_pairs = self.w_pkv = self.w_dkv = 0

    def add(self, new: int, ctx: int, samples: bool) -> None:
        """One sequence with `new` tokens after `ctx` cached ones; one new token after a context is a decode."""
        window = self.window
        if new == 1 and ctx > 0:
            self.d_seqs += 1
            self.d_kv += ctx + 1
            if window:
                self.w_dkv += min(ctx + 1, window)
        else:
            self.p_seqs += 1
            self.p_tokens += new
            self.p_pairs += new * ctx + new * (new + 1) // 2
            self.p_kv += ctx + new
            if window:
                self.w_pairs += window_pairs(new, ctx, window)
                self.w_pkv += min(ctx + new, new + window - 1)
        self.sampled += samples

    def add_verify(self, new: int, ctx: int) -> None:
        """A decoding sequence's token and its new - 1 draft tokens, verified together (speculative
        decoding): attention as a chunk of `new` queries after `ctx`, logits at every position."""
        self.add(new, ctx, samples=True)
        self.spec += new - 1

    def add_decodes(self, seqs: int, kv_tokens: int) -> None:
        """`seqs` decodes reading kv_tokens in all; in a windowed layer at most `window` each (an upper bound:
        exact when every one of them is past the window, or none is)."""
        self.d_seqs += seqs
        self.d_kv += kv_tokens
        self.sampled += seqs
        if self.window:
            self.w_dkv += min(kv_tokens, seqs * self.window)

    def build(self, num_loras: int = 0, lora_load_s: float = 0.0) -> BatchShape:
        """The shape, with the batch's LoRA adapters and the time to load the new ones, if any."""
        return BatchShape(
            self.p_seqs,
            self.p_tokens,
            self.p_pairs,
            self.p_kv,
            self.d_seqs,
            self.d_kv,
            self.sampled,
            self.spec,
            num_loras,
            lora_load_s,
            window=self.window,
            prefill_window_pairs=self.w_pairs,
            prefill_window_kv_tokens=self.w_pkv,
            decode_window_kv_tokens=self.w_dkv,
        )
