"""Sliding-window attention in the iteration-time model: which layers attend within a window, and what a
windowed layer's attention touches in one step.

vLLM 0.15.1 runs a sliding-window layer (Mistral v0.1 and Phi-3 4k on every layer; Gemma 2 and gpt-oss on every
other; Gemma 3 on five layers in six) with FlashAttention's window_size = (sliding_window - 1, 0)
(v1/attention/backends/flash_attn.py FlashAttentionImpl.__init__): a query sees itself and the window - 1
tokens before it. So a chunk of n new tokens after c cached ones touches sum(min(p + 1, window)) query-key
pairs over its positions p = c .. c + n - 1 (n x window once c >= window - 1) and reads min(c + n, n + window - 1)
keys; a decode reads min(context, window) cached tokens. Full-attention layers are unchanged, and a step's
attention is the sum of both kinds, each times its layer count.

The sums come with the BatchShape when its builder knew the window (perf/batch.py); otherwise they are bounded
from the shape's totals: at most `window` pairs per prefill query, window - 1 + n keys per prefill and window
keys per decode. The bound is exact for a lone prefill chunk that lies within the window or starts past it, and
for decodes all past the window or all within it; above the exact figure otherwise (never above full attention).
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.model.spec import ModelSpec
from ttftsim.perf.batch import BatchShape


@dataclass(frozen=True, slots=True)
class LayerKinds:
    """How many layers attend over the whole context and how many within `window` (0: none windowed)."""

    full: int
    windowed: int
    window: int

    @classmethod
    def of(cls, spec: ModelSpec) -> LayerKinds:
        window, layers = spec.sliding_window, spec.num_hidden_layers
        windowed = layers if spec.num_sliding_window_layers is None else spec.num_sliding_window_layers
        if window is None or windowed == 0:
            return cls(layers, 0, 0)
        return cls(layers - windowed, windowed, window)


def windowed_sums(shape: BatchShape, window: int) -> tuple[int, int, int]:
    """(prefill query-key pairs, prefill keys read, decode keys read) of one windowed layer: the shape's own
    sums when they were counted for this window, else the bounds from its totals (module docstring)."""
    if shape.window == window:
        return shape.prefill_window_pairs, shape.prefill_window_kv_tokens, shape.decode_window_kv_tokens
    pairs = min(shape.prefill_attn_pairs, shape.prefill_tokens * window)
    prefill_kv = min(shape.prefill_kv_tokens, shape.prefill_tokens + shape.num_prefill_seqs * (window - 1))
    decode_kv = min(shape.decode_kv_tokens, shape.num_decode_seqs * window)
    return pairs, prefill_kv, decode_kv
