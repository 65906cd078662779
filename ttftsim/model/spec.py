"""A decoder-only transformer's architecture: the numbers the simulator sizes and times a model by.

Covers the Llama layout and the families that differ from it only in where biases and norms sit (what
`Architecture` records per model_type): Llama 2/3, Mistral, Mixtral-style MoE, Qwen2/2.5 (q/k/v biases), Qwen3
and Qwen3-MoE (q/k norms), Gemma 1/2/3 (pre- and post-norms), Phi-3/4, Granite, Cohere Command R/R+/R7B (one
LayerNorm feeding attention and MLP in parallel: the same weights and FLOPs), and gpt-oss (biases everywhere,
MoE). Two more layouts on top: DeepSeek V2/V3, R1 and Kimi K2 (multi-head latent attention: `kv_lora_rank` and
its head widths; MoE with shared experts; the first `num_dense_layers` layers dense), and Qwen1.5-MoE /
Qwen2-MoE (a shared expert behind a sigmoid gate), and Llama 4 Scout's text model (a shared expert beside top-1
routing on every layer). Reading a Hugging Face config.json into a spec is ttftsim/model/hf_config.py.

Left out, and refused with the reason when a config.json declares them (hf_config.py): dense and MoE layers
listed by index (Qwen2-MoE mlp_only_layers; an interleave step is modelled: moe_layer_step, Llama 4 Maverick),
and hybrid attention/state-space stacks. A sliding window (sliding_window on num_sliding_window_layers layers)
is modelled in attention time (perf/attention.py), in vLLM's KV-cache groups (perf/kv_groups.py) and in the
KV manager, which frees what leaves the window (kvcache/windowed.py). Chunked local attention (Llama 4) and a
checkpoint's own quantization_config (other than fp8 and mxfp4, which are those weight formats) are read but not
modelled (attention spans the full context, which is exact for contexts shorter than the chunk; weights take
native_dtype unless the engine sets a quantization). Each run says what is left out in its warnings
(ttftsim/model/not_modelled.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ttftsim.config.dtypes import WeightDtype


@dataclass(frozen=True)
class Architecture:
    """What a model_type adds to the Llama layer (parameter counts only; the timing model is the same)."""

    qkv_bias: bool = False  # q, k, v projections carry biases whatever attention_bias says (Qwen2)
    norms_per_layer: int = 2  # RMSNorms of hidden_size per block (Gemma 2/3 norm before and after each half)
    qk_norm: bool = False  # an RMSNorm of head_dim on the queries and one on the keys (Qwen3, Gemma 3)
    expert_bias: bool = False  # the experts' and the router's linears carry biases (gpt-oss)


ARCHITECTURES: dict[str, Architecture] = {
    "llama": Architecture(),  # Llama 2/3, Yi, Falcon3, DeepSeek-R1 Llama distills
    "mistral": Architecture(),
    "mixtral": Architecture(),
    "qwen2": Architecture(qkv_bias=True),  # Qwen2/2.5, DeepSeek-R1 Qwen distills
    "qwen3": Architecture(qk_norm=True),
    "qwen3_moe": Architecture(qk_norm=True),
    "gemma": Architecture(),
    "gemma2": Architecture(norms_per_layer=4),
    "gemma3_text": Architecture(norms_per_layer=4, qk_norm=True),
    "phi3": Architecture(),  # Phi-3, Phi-3.5, Phi-4: fused qkv and gate_up, the same parameters
    "granite": Architecture(),  # Granite 3.x dense: Llama plus scalar multipliers
    "cohere": Architecture(norms_per_layer=1),  # Command R/R+ (transformers modeling_cohere.py): 1 LayerNorm a block
    "cohere2": Architecture(norms_per_layer=1),  # Command R7B (modeling_cohere2.py): as cohere, window on 3 layers in 4
    "gpt_oss": Architecture(expert_bias=True),  # attention biases come from attention_bias: true
    "qwen2_moe": Architecture(qkv_bias=True),  # Qwen1.5-MoE, Qwen2-57B-A14B: shared expert with a sigmoid gate
    "deepseek_v2": Architecture(),  # MLA, shared experts, first_k_dense_replace dense layers
    "deepseek_v3": Architecture(),  # DeepSeek-V3/R1: as V2, sigmoid router with a score-correction bias
    "kimi_k2": Architecture(),  # Kimi K2: DeepseekV3ForCausalLM with 384 experts and 64 heads
    "llama4_text": Architecture(),  # Llama 4 Scout (text): top-1 of 16 experts, a shared expert; weightless qk norm
}
SUPPORTED_MODEL_TYPES = tuple(ARCHITECTURES)


class ModelSpec(BaseModel):
    """Architecture numbers. Invariant: heads divide evenly into KV-head groups, top-k <= experts, and the
    sliding-window layers are no more than the layers."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(description="Display name of the model")
    model_type: str = Field(description=f"Hugging Face model_type ({', '.join(SUPPORTED_MODEL_TYPES)})")
    hidden_size: int = Field(gt=0, description="Model width d_model")
    intermediate_size: int = Field(gt=0, description="MLP (or each expert's) inner width")
    num_hidden_layers: int = Field(gt=0, description="Number of transformer blocks")
    num_attention_heads: int = Field(gt=0, description="Query heads")
    num_key_value_heads: int = Field(gt=0, description="KV heads (GQA); defaults to num_attention_heads")
    head_dim: int = Field(gt=0, description="Per-head width; defaults to hidden_size / num_attention_heads")
    vocab_size: int = Field(gt=0, description="Vocabulary size")
    max_position_embeddings: int = Field(gt=0, description="Longest context the model supports")
    tie_word_embeddings: bool = Field(description="LM head shares the embedding matrix")
    num_local_experts: int = Field(ge=1, description="MoE experts per layer (1 for a dense model)")
    num_experts_per_tok: int = Field(ge=1, description="Experts each token is routed to (top-k)")
    native_dtype: WeightDtype = Field(
        description="Weight format of the checkpoint: torch_dtype, or the quantization its id names (-FP8, -AWQ)"
    )
    attention_bias: bool = Field(default=False, description="q, k, v and o projections carry biases (gpt-oss)")
    sliding_window: int | None = Field(
        default=None, ge=1, description="Attention window in tokens when one applies (modelled in attention time)"
    )
    num_sliding_window_layers: int | None = Field(
        default=None, ge=0, description="Layers that attend within sliding_window (None: every layer)"
    )
    quantization_method: str | None = Field(
        default=None, description="quantization_config.quant_method of a quantized checkpoint (read, not modelled)"
    )
    attention_chunk_size: int | None = Field(
        default=None, ge=1, description="Chunked local attention span in tokens (Llama 4; read, not modelled)"
    )
    num_chunked_layers: int = Field(default=0, ge=0, description="Layers with chunked local attention (Llama 4)")
    kv_lora_rank: int | None = Field(
        default=None, ge=1, description="MLA: width of the compressed KV latent each token caches (None: no MLA)"
    )
    q_lora_rank: int | None = Field(
        default=None, ge=1, description="MLA: width of the compressed query (None: queries from the hidden state)"
    )
    qk_nope_head_dim: int = Field(default=0, ge=0, description="MLA: per-head query/key width without RoPE")
    qk_rope_head_dim: int = Field(default=0, ge=0, description="MLA: per-head query/key width with RoPE")
    v_head_dim: int = Field(default=0, ge=0, description="MLA: per-head value width")
    shared_expert_intermediate_size: int = Field(
        default=0, ge=0, description="Inner width of an MoE layer's always-active shared expert(s) (0: none)"
    )
    shared_expert_gate: bool = Field(
        default=False, description="A sigmoid gate (hidden -> 1 linear) scales the shared expert (Qwen2-MoE)"
    )
    num_dense_layers: int = Field(
        default=0, ge=0, description="Leading layers whose MLP is dense instead of MoE (first_k_dense_replace)"
    )
    moe_layer_step: int = Field(
        default=1,
        ge=1,
        description="MoE on every moe_layer_step-th layer only, layer i when (i + 1) % step == 0, the others dense "
        "(interleave_moe_layer_step, decoder_sparse_step)",
    )
    dense_intermediate_size: int | None = Field(
        default=None, ge=1, description="Inner width of the dense layers' MLP (leading or interleaved)"
    )

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelSpec:
        if self.model_type not in ARCHITECTURES:
            raise ValueError(
                f"model_type {self.model_type!r} is not supported (supported: {', '.join(SUPPORTED_MODEL_TYPES)})"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads {self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads {self.num_key_value_heads}"
            )
        if self.num_experts_per_tok > self.num_local_experts:
            raise ValueError(
                f"num_experts_per_tok {self.num_experts_per_tok} exceeds num_local_experts {self.num_local_experts}"
            )
        windowed = self.num_sliding_window_layers
        if windowed is not None and windowed > self.num_hidden_layers:
            raise ValueError(f"num_sliding_window_layers {windowed} exceeds num_hidden_layers {self.num_hidden_layers}")
        if self.kv_lora_rank is not None and not (self.qk_nope_head_dim and self.qk_rope_head_dim and self.v_head_dim):
            raise ValueError(
                f"kv_lora_rank {self.kv_lora_rank} (MLA) needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim, "
                f"got {self.qk_nope_head_dim}, {self.qk_rope_head_dim}, {self.v_head_dim}"
            )
        self._check_moe_layout()
        return self

    def _check_moe_layout(self) -> None:
        if self.num_dense_layers > self.num_hidden_layers:
            raise ValueError(
                f"num_dense_layers {self.num_dense_layers} exceeds num_hidden_layers {self.num_hidden_layers}"
            )
        if self.num_dense_layers and self.dense_intermediate_size is None:
            raise ValueError(f"num_dense_layers {self.num_dense_layers} needs dense_intermediate_size")
        if self.moe_layer_step > 1 and (self.dense_intermediate_size is None or self.num_dense_layers):
            raise ValueError(
                f"moe_layer_step {self.moe_layer_step} needs dense_intermediate_size and no leading dense layers "
                f"(num_dense_layers {self.num_dense_layers})"
            )
        if (
            self.shared_expert_intermediate_size or self.num_dense_layers or self.moe_layer_step > 1
        ) and not self.is_moe:
            raise ValueError(
                f"shared_expert_intermediate_size {self.shared_expert_intermediate_size}, num_dense_layers "
                f"{self.num_dense_layers} and moe_layer_step {self.moe_layer_step} apply to MoE models only "
                f"(num_local_experts {self.num_local_experts})"
            )

    @property
    def architecture(self) -> Architecture:
        return ARCHITECTURES[self.model_type]

    @property
    def is_moe(self) -> bool:
        return self.num_local_experts > 1

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention: each token caches one latent of kv_lora_rank + qk_rope_head_dim."""
        return self.kv_lora_rank is not None

    @property
    def mla_nope_dim(self) -> int | None:
        """qk_nope_head_dim of an MLA model (vLLM's MLA backend choice reads it), None for any other attention."""
        return self.qk_nope_head_dim if self.is_mla else None

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is the routed experts (all but the dense ones; none for a dense model)."""
        return self.num_moe_layers_in(0, self.num_hidden_layers)

    @property
    def num_dense_mlp_layers(self) -> int:
        """Layers of an MoE model whose MLP is dense (of dense_intermediate_size): leading or interleaved."""
        return self.num_hidden_layers - self.num_moe_layers if self.is_moe else 0

    def num_moe_layers_in(self, start: int, count: int) -> int:
        """MoE layers among layers start .. start + count - 1 (a pipeline stage's): every one past the leading
        dense layers, or with an interleave step those i where (i + 1) % step == 0 (vLLM 0.15.1 llama4.py
        Llama4DecoderLayer, qwen2_moe.py Qwen2MoeDecoderLayer)."""
        if not self.is_moe:
            return 0
        if self.moe_layer_step > 1:
            step = self.moe_layer_step
            return (start + count) // step - start // step
        return max(0, start + count - max(start, self.num_dense_layers))

    @property
    def widest_mlp(self) -> int:
        """The largest MLP inner width of any layer: a dense layer's, the shared expert's or an expert's."""
        return max(self.intermediate_size, self.dense_intermediate_size or 0, self.shared_expert_intermediate_size)

    @property
    def has_attention_bias(self) -> bool:
        """q, k and v carry biases (o too when attention_bias is set)."""
        return self.attention_bias or self.architecture.qkv_bias
