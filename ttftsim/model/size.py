"""Sizes derived from a ModelSpec: parameter counts, weight bytes, KV-cache bytes per token.

KV bytes per token = 2 (K and V) x layers x KV heads x head_dim x bytes per element: GQA divides it by
the group size, which the common back-of-envelope formula (hidden size x layers) misses. It counts every
layer, sliding-window ones too (vLLM's hybrid allocator keeps only the window there: not modelled, and said so
by ttftsim/model/not_modelled.py). Parameter counts follow the Llama layer plus what spec.architecture adds per
family (biases, Gemma's four norms, Qwen3's q/k norms); gpt-oss's attention sinks (one scalar per head) are
left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.config.dtypes import KvDtype, WeightDtype, kv_bytes_per_element, weight_bytes_per_param
from ttftsim.model.spec import ModelSpec


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one transformer block, split the way they are sharded and quantized."""

    attention: int  # q, k, v, o projections (and biases)
    expert: int  # one expert's (or the dense MLP's) gate, up and down projections
    router: int
    norms: int


def layer_params(spec: ModelSpec) -> LayerParams:
    h, d, arch = spec.hidden_size, spec.head_dim, spec.architecture
    q_width, kv_width = spec.num_attention_heads * d, spec.num_key_value_heads * d
    attention = h * q_width + 2 * h * kv_width + q_width * h
    if spec.has_attention_bias:
        attention += q_width + 2 * kv_width
    if spec.attention_bias:
        attention += h  # o_proj's bias
    expert = 3 * h * spec.intermediate_size
    router = h * spec.num_local_experts if spec.is_moe else 0
    if arch.expert_bias:
        expert += 2 * spec.intermediate_size + h
        router += spec.num_local_experts if spec.is_moe else 0
    norms = arch.norms_per_layer * h + (2 * d if arch.qk_norm else 0)
    return LayerParams(attention=attention, expert=expert, router=router, norms=norms)


def embedding_params(spec: ModelSpec) -> int:
    """Input embedding plus LM head (once if tied) plus the final norm."""
    tables = 1 if spec.tie_word_embeddings else 2
    return tables * spec.vocab_size * spec.hidden_size + spec.hidden_size


def param_count(spec: ModelSpec) -> int:
    layer = layer_params(spec)
    per_layer = layer.attention + spec.num_local_experts * layer.expert + layer.router + layer.norms
    return spec.num_hidden_layers * per_layer + embedding_params(spec)


def active_param_count(spec: ModelSpec) -> int:
    """Parameters that touch one token: top-k experts instead of all (the input embedding is a lookup
    but counted, as is conventional)."""
    layer = layer_params(spec)
    per_layer = layer.attention + spec.num_experts_per_tok * layer.expert + layer.router + layer.norms
    return spec.num_hidden_layers * per_layer + embedding_params(spec)


def weight_bytes(spec: ModelSpec, dtype: WeightDtype) -> float:
    """Checkpoint size: quantized block linears, embeddings/norms/router in 16 bits."""
    layer = layer_params(spec)
    linear = layer.attention + spec.num_local_experts * layer.expert
    unquantized = layer.router + layer.norms
    per_layer = linear * weight_bytes_per_param(dtype) + unquantized * 2
    return spec.num_hidden_layers * per_layer + embedding_params(spec) * 2


def kv_bytes_per_token(spec: ModelSpec, dtype: KvDtype) -> int:
    """KV-cache bytes one token occupies across all layers and all TP ranks together."""
    return 2 * spec.num_hidden_layers * spec.num_key_value_heads * spec.head_dim * kv_bytes_per_element(dtype)
