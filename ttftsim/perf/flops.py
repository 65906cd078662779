"""Forward-pass FLOPs of a prefill: 2 x (active, non-embedding) parameters per token plus causal attention.

The input embedding is a lookup (no FLOPs); the LM head runs for the last token only, as in serving.
"""

from __future__ import annotations

from ttftsim.model.size import active_param_count, embedding_params
from ttftsim.model.spec import ModelSpec


def prefill_flops(spec: ModelSpec, tokens: int, context_tokens: int = 0) -> float:
    """FLOPs to prefill `tokens` new tokens after `context_tokens` cached ones, sampling one token."""
    body = active_param_count(spec) - embedding_params(spec)
    pairs = tokens * context_tokens + tokens * (tokens + 1) // 2
    attention = 4.0 * spec.num_hidden_layers * spec.num_attention_heads * spec.head_dim * pairs
    lm_head = 2.0 * spec.hidden_size * spec.vocab_size
    return 2.0 * body * tokens + attention + lm_head
