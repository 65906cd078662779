"""Forward-pass FLOPs of a prefill: 2 x (active, non-embedding) parameters per token plus causal attention.

The input embedding is a lookup (no FLOPs); the LM head runs for the last token only, as in serving.
Multi-head latent attention (perf/mla.py) runs the prefill as multi-head attention with a query/key width of
qk_nope + qk_rope and a value width of v_head_dim, after kv_b_proj has up-projected the latent of every
token attended to: the new tokens' up-projection is in the parameters, the cached context's is added.
"""

from __future__ import annotations

from ttftsim.model.size import active_param_count, embedding_params
from ttftsim.model.spec import ModelSpec


def prefill_flops(spec: ModelSpec, tokens: int, context_tokens: int = 0) -> float:
    """FLOPs to prefill `tokens` new tokens after `context_tokens` cached ones, sampling one token."""
    body = active_param_count(spec) - embedding_params(spec)
    pairs = tokens * context_tokens + tokens * (tokens + 1) // 2
    lm_head = 2.0 * spec.hidden_size * spec.vocab_size
    if spec.is_mla:
        heads, layers = spec.num_attention_heads, spec.num_hidden_layers
        width = heads * (spec.qk_nope_head_dim + spec.qk_rope_head_dim + spec.v_head_dim)
        up = (spec.kv_lora_rank or 0) * heads * (spec.qk_nope_head_dim + spec.v_head_dim)
        attention = 2.0 * layers * width * pairs + 2.0 * layers * up * context_tokens
        return 2.0 * body * tokens + attention + lm_head
    attention = 4.0 * spec.num_hidden_layers * spec.num_attention_heads * spec.head_dim * pairs
    return 2.0 * body * tokens + attention + lm_head
