"""A decoder-only transformer's architecture, read from the Hugging Face `config.json` users already have.

Covers Llama 2/3, Mistral, Qwen2/2.5 (attention biases) and Mixtral-style MoE (num_local_experts,
num_experts_per_tok). Sliding-window attention (Mistral v0.1) and a checkpoint's own quantization_config
are read but not modelled (attention spans the full context, which is exact for contexts shorter than the
window; weights take torch_dtype unless the engine sets a quantization): each run says so in its warnings
(ttftsim/model/not_modelled.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ttftsim.config.dtypes import HF_TORCH_DTYPES, WeightDtype
from ttftsim.config.loading import validation_error

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2")


class ModelSpec(BaseModel):
    """Architecture numbers. Invariant: heads divide evenly into KV-head groups, top-k <= experts."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(description="Display name of the model")
    model_type: str = Field(description="Hugging Face model_type (llama, mistral, mixtral, qwen2)")
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
    native_dtype: WeightDtype = Field(description="Checkpoint dtype (torch_dtype)")
    sliding_window: int | None = Field(
        default=None, ge=1, description="Attention window in tokens when one applies (read, not modelled)"
    )
    quantization_method: str | None = Field(
        default=None, description="quantization_config.quant_method of a quantized checkpoint (read, not modelled)"
    )

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelSpec:
        if self.model_type not in SUPPORTED_MODEL_TYPES:
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
        return self

    @property
    def is_moe(self) -> bool:
        return self.num_local_experts > 1

    @property
    def has_attention_bias(self) -> bool:
        return self.model_type == "qwen2"


def _with_hf_defaults(config: dict[str, Any], name: str) -> dict[str, Any]:
    """Fill the defaults transformers applies when a config.json leaves a field out."""
    data = dict(config)
    data["name"] = name
    heads = data.get("num_attention_heads")
    data.setdefault("num_key_value_heads", heads)
    if data.get("head_dim") is None and isinstance(heads, int) and heads > 0:
        hidden = data.get("hidden_size")
        if isinstance(hidden, int):
            data["head_dim"] = hidden // heads
    data.setdefault("tie_word_embeddings", False)
    data.setdefault("max_position_embeddings", 4096)
    data["num_local_experts"] = data.get("num_local_experts") or 1
    data["num_experts_per_tok"] = data.get("num_experts_per_tok") or 1
    torch_dtype = data.get("torch_dtype") or data.get("dtype") or "bfloat16"
    data["native_dtype"] = HF_TORCH_DTYPES.get(str(torch_dtype), "bf16")
    if data.get("model_type") == "qwen2" and not data.get("use_sliding_window"):
        data["sliding_window"] = None  # Qwen2 configs carry a window they do not use unless use_sliding_window
    quantization = data.get("quantization_config")
    if isinstance(quantization, dict):
        data["quantization_method"] = str(quantization.get("quant_method") or "unnamed")
    return data


def spec_from_hf_config(config: dict[str, Any], name: str, source: str) -> ModelSpec:
    """Build a ModelSpec from a parsed config.json; errors name the source file and field."""
    try:
        return ModelSpec.model_validate(_with_hf_defaults(config, name))
    except ValidationError as exc:
        raise validation_error(source, exc) from None
