"""`ttftsim explain`: the arithmetic the advice articles get wrong, computed from the model's config.

- KV bytes per token = 2 (K and V) x layers x KV heads x head_dim x bytes per element (GQA: KV heads, not
  query heads; not hidden size x heads);
- prefill FLOPs = 2 x non-embedding parameters x tokens + causal attention (4 x layers x heads x head_dim
  per query-key pair) + the LM head for the sampled token;
- decode arithmetic intensity = FLOPs of one decode step / bytes it reads (weights once, plus each
  sequence's KV), which grows with the batch.
"""

from __future__ import annotations

from typing import Any

from ttftsim.config.dtypes import KvDtype, WeightDtype
from ttftsim.model.catalog import load_model
from ttftsim.model.size import active_param_count, embedding_params, kv_bytes_per_token, weight_bytes
from ttftsim.perf.flops import prefill_flops as _prefill_flops

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1}


def kv_bytes(model: str, dtype: KvDtype, tokens: int) -> dict[str, Any]:
    spec = load_model(model, "--model")
    per_token = kv_bytes_per_token(spec, dtype)
    total, note = per_token * tokens, None
    window = spec.sliding_window
    if window is not None and window < tokens and not spec.is_mla:  # windowed layers keep their last `window` tokens
        layers = spec.num_sliding_window_layers
        layers = spec.num_hidden_layers if layers is None else layers
        total -= per_token * layers // spec.num_hidden_layers * (tokens - window)
        note = f"{layers} of {spec.num_hidden_layers} layers keep only their last {window:,} tokens" if layers else None
    return {
        "model": spec.name,
        "window": note,
        "formula": (
            f"{spec.num_hidden_layers} layers x ({spec.kv_lora_rank} kv_lora_rank + {spec.qk_rope_head_dim} "
            f"qk_rope_head_dim) x {DTYPE_BYTES[dtype]} bytes (one MLA latent, whole on every TP rank)"
            if spec.is_mla
            else f"2 x {spec.num_hidden_layers} layers x {spec.num_key_value_heads} KV heads x {spec.head_dim} "
            f"head_dim x {DTYPE_BYTES[dtype]} bytes"
        ),
        "bytes_per_token": per_token,
        "tokens": tokens,
        "total_bytes": total,
    }


def prefill_flops(model: str, tokens: int) -> dict[str, Any]:
    spec = load_model(model, "--model")
    body = active_param_count(spec) - embedding_params(spec)
    return {
        "model": spec.name,
        "tokens": tokens,
        "dense_flops": 2.0 * body * tokens,
        "total_flops": _prefill_flops(spec, tokens),
        "non_embedding_params": body,
    }


def decode_intensity(model: str, batch: int, context: int = 1024, dtype: WeightDtype = "bf16") -> float:
    """FLOPs per byte read in one decode step of `batch` sequences of `context` tokens each."""
    spec = load_model(model, "--model")
    body = active_param_count(spec) - embedding_params(spec)
    flops = (
        2.0 * body * batch + 4.0 * spec.num_hidden_layers * spec.num_attention_heads * spec.head_dim * batch * context
    )
    kv_dtype: KvDtype = "bf16" if dtype not in ("fp8",) else "fp8"
    moved = weight_bytes(spec, dtype) + batch * context * kv_bytes_per_token(spec, kv_dtype)
    return flops / moved
