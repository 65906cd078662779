"""Sizes derived from a ModelSpec: parameter counts, weight bytes, KV-cache bytes per token.

KV bytes per token = 2 (K and V) x layers x KV heads x head_dim x bytes per element: GQA divides it by
the group size, which the common back-of-envelope formula (hidden size x layers) misses. Multi-head latent
attention caches one latent per layer instead: layers x (kv_lora_rank + qk_rope_head_dim) x bytes (vLLM
MLAAttentionSpec: one "KV head" of head_size kv_lora_rank + qk_rope_head_dim, no separate V). It counts every
layer, sliding-window ones too (vLLM's hybrid allocator keeps only the window there: the KV manager frees the
rest as a request runs, ttftsim/kvcache/windowed.py). Parameter counts follow the Llama layer plus what
spec.architecture adds per family (biases, Gemma's four norms, Qwen3's q/k norms), MLA's projections, shared
experts and leading dense layers; gpt-oss's attention sinks (one scalar per head) and DeepSeek-V3's router
score-correction bias (one per expert) are left out. Weight bytes are the checkpoint's, or with an ExpertPadding
the routed experts as vLLM allocates them on the GPUs (config/dtypes.py mxfp4_expert_padding).
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.config.dtypes import (
    EXPERTS_ONLY,
    NO_PADDING,
    ExpertPadding,
    KvDtype,
    WeightDtype,
    kv_bytes_per_element,
    weight_bytes_per_param,
)
from ttftsim.model.spec import ModelSpec


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one transformer block, split the way they are sharded and quantized."""

    attention: int  # q, k, v, o projections (and biases); MLA's down- and up-projections
    expert: int  # one routed expert's (or the dense MLP's) gate, up and down projections
    router: int
    norms: int
    shared_expert: int = 0  # an MoE layer's shared expert(s), all together
    shared_gate: int = 0  # the shared expert's sigmoid gate (Qwen2-MoE), hidden -> 1
    dense_mlp: int = 0  # the MLP of a leading dense layer of an MoE model (first_k_dense_replace)


def mla_attention_params(spec: ModelSpec) -> int:
    """MLA's linears (vLLM DeepseekV2MLAAttention): q_a_proj (hidden -> q_lora_rank) and q_b_proj, or q_proj
    when q_lora_rank is None; kv_a_proj_with_mqa (hidden -> kv_lora_rank + rope); kv_b_proj (kv_lora_rank ->
    heads x (nope + v)); o_proj (heads x v -> hidden)."""
    h, heads, latent = spec.hidden_size, spec.num_attention_heads, spec.kv_lora_rank or 0
    qk = spec.qk_nope_head_dim + spec.qk_rope_head_dim
    q_rank = spec.q_lora_rank
    query = h * heads * qk if q_rank is None else h * q_rank + q_rank * heads * qk
    kv_down = h * (latent + spec.qk_rope_head_dim)
    kv_up = latent * heads * (spec.qk_nope_head_dim + spec.v_head_dim)
    return query + kv_down + kv_up + heads * spec.v_head_dim * h


def _attention_params(spec: ModelSpec) -> int:
    if spec.is_mla:
        return mla_attention_params(spec)
    h, d = spec.hidden_size, spec.head_dim
    q_width, kv_width = spec.num_attention_heads * d, spec.num_key_value_heads * d
    attention = h * q_width + 2 * h * kv_width + q_width * h
    if spec.has_attention_bias:
        attention += q_width + 2 * kv_width
    if spec.attention_bias:
        attention += h  # o_proj's bias
    return attention


def layer_params(spec: ModelSpec) -> LayerParams:
    h, d, arch = spec.hidden_size, spec.head_dim, spec.architecture
    expert = 3 * h * spec.intermediate_size
    router = h * spec.num_local_experts if spec.is_moe else 0
    if arch.expert_bias:
        expert += 2 * spec.intermediate_size + h
        router += spec.num_local_experts if spec.is_moe else 0
    norms = arch.norms_per_layer * h + (2 * d if arch.qk_norm else 0)
    if spec.is_mla:
        norms += (spec.kv_lora_rank or 0) + (spec.q_lora_rank or 0)  # kv_a_layernorm, q_a_layernorm
    return LayerParams(
        attention=_attention_params(spec),
        expert=expert,
        router=router,
        norms=norms,
        shared_expert=3 * h * spec.shared_expert_intermediate_size,
        shared_gate=h if spec.shared_expert_gate else 0,
        dense_mlp=3 * h * (spec.dense_intermediate_size or 0),
    )


def padded_expert_params(spec: ModelSpec, padding: ExpertPadding, slices: int = 1) -> int:
    """One routed expert's parameters as vLLM allocates it over `slices` GPUs, all slices together: the hidden
    size and each GPU's slice of the intermediate size (intermediate // slices, FusedMoE's
    intermediate_size_per_partition) rounded up to the padding's multiples, in its gate, up and down projections
    and their biases (the down projection's once, as layer_params counts it). No padding: layer_params' expert."""
    if padding == NO_PADDING:
        return layer_params(spec).expert
    hidden = padding.padded_hidden(spec.hidden_size)
    inter = slices * padding.padded_intermediate(spec.intermediate_size // slices)
    params = 3 * hidden * inter
    if spec.architecture.expert_bias:
        params += 2 * inter + hidden
    return params


def _padding_params(spec: ModelSpec, padding: ExpertPadding, slices: int) -> int:
    """What padding adds to all routed experts of all MoE layers, over `slices` GPUs together."""
    if not spec.is_moe:
        return 0
    extra = padded_expert_params(spec, padding, slices) - layer_params(spec).expert
    return spec.num_moe_layers * spec.num_local_experts * extra


def _block_linear_params(spec: ModelSpec, experts: int) -> int:
    """Quantizable linears of all blocks, with `experts` routed experts per MoE layer (all of them for the
    size, top-k for what one token touches). A dense model's MLP is its one expert on every layer."""
    layer = layer_params(spec)
    moe_layers = spec.num_moe_layers
    if not spec.is_moe:
        return spec.num_hidden_layers * (layer.attention + layer.expert)
    moe = moe_layers * (experts * layer.expert + layer.shared_expert)
    return spec.num_hidden_layers * layer.attention + moe + spec.num_dense_mlp_layers * layer.dense_mlp


def _block_small_params(spec: ModelSpec) -> int:
    """Norms, routers and gates of all blocks (kept in 16 bits)."""
    layer = layer_params(spec)
    return spec.num_hidden_layers * layer.norms + spec.num_moe_layers * (layer.router + layer.shared_gate)


def embedding_params(spec: ModelSpec) -> int:
    """Input embedding plus LM head (once if tied) plus the final norm."""
    tables = 1 if spec.tie_word_embeddings else 2
    return tables * spec.vocab_size * spec.hidden_size + spec.hidden_size


def param_count(spec: ModelSpec) -> int:
    """All parameters (DeepSeek's multi-token-prediction layer, a separate module, is not counted)."""
    return _block_linear_params(spec, spec.num_local_experts) + _block_small_params(spec) + embedding_params(spec)


def active_param_count(spec: ModelSpec) -> int:
    """Parameters that touch one token: top-k experts instead of all, shared experts and dense layers in full
    (the input embedding is a lookup but counted, as is conventional)."""
    return _block_linear_params(spec, spec.num_experts_per_tok) + _block_small_params(spec) + embedding_params(spec)


def weight_bytes(spec: ModelSpec, dtype: WeightDtype, padding: ExpertPadding = NO_PADDING, slices: int = 1) -> float:
    """Checkpoint size: quantized block linears (with MXFP4 the routed experts alone, the other linears in 16 bits),
    embeddings/norms/router in 16 bits; with `padding`, the routed experts as vLLM allocates them over `slices`
    GPUs (every GPU's bytes together)."""
    linear = _block_linear_params(spec, spec.num_local_experts)
    padded = _padding_params(spec, padding, slices)
    if dtype in EXPERTS_ONLY:
        routed = spec.num_moe_layers * spec.num_local_experts * layer_params(spec).expert if spec.is_moe else 0
        kept = linear - routed + _block_small_params(spec) + embedding_params(spec)
        return (routed + padded) * weight_bytes_per_param(dtype) + kept * 2
    linear_bytes = (linear + padded) * weight_bytes_per_param(dtype)
    return linear_bytes + _block_small_params(spec) * 2 + embedding_params(spec) * 2


def layer_weight_bytes(
    spec: ModelSpec, dtype: WeightDtype, padding: ExpertPadding = NO_PADDING, slices: int = 1
) -> tuple[float, float]:
    """Bytes of one leading dense layer and of one MoE layer (for a dense model both are its one layer); with
    `padding`, the MoE layer's routed experts as vLLM allocates them over `slices` GPUs."""
    layer = layer_params(spec)
    per_param = weight_bytes_per_param(dtype)
    expert = padded_expert_params(spec, padding, slices)
    if dtype in EXPERTS_ONLY:  # the routed experts quantized, every other linear in 16 bits
        dense = (layer.attention + (layer.dense_mlp if spec.is_moe else layer.expert) + layer.norms) * 2.0
        if not spec.is_moe:
            return dense, dense
        kept = layer.attention + layer.shared_expert + layer.norms + layer.router + layer.shared_gate
        return dense, spec.num_local_experts * expert * per_param + kept * 2.0
    dense = (layer.attention + (layer.dense_mlp if spec.is_moe else layer.expert)) * per_param + layer.norms * 2
    if not spec.is_moe:
        return dense, dense
    moe_linear = layer.attention + spec.num_local_experts * expert + layer.shared_expert
    return dense, moe_linear * per_param + (layer.norms + layer.router + layer.shared_gate) * 2


def kv_bytes_per_token(spec: ModelSpec, dtype: KvDtype) -> int:
    """KV-cache bytes one token occupies across all layers and all TP ranks together; for MLA one latent of
    kv_lora_rank + qk_rope_head_dim per layer, which every TP rank keeps whole (ttftsim/perf/memory.py)."""
    if spec.is_mla:
        latent = (spec.kv_lora_rank or 0) + spec.qk_rope_head_dim
        return spec.num_hidden_layers * latent * kv_bytes_per_element(dtype)
    return 2 * spec.num_hidden_layers * spec.num_key_value_heads * spec.head_dim * kv_bytes_per_element(dtype)
