"""A Hugging Face config.json (or one of our presets, which use the same field names) read into a ModelSpec.

Fills the defaults transformers applies when a field is left out, and reads the names families use for the
same thing: num_experts (Qwen-MoE) and n_routed_experts (DeepSeek) for num_local_experts,
moe_intermediate_size for the experts' width (the config's intermediate_size is then the dense layers' width,
first_k_dense_replace of them), n_shared_experts x moe_intermediate_size (DeepSeek) or
shared_expert_intermediate_size (Qwen2-MoE, with its sigmoid gate) for the shared expert, MLA's head widths
(head_dim is qk_nope_head_dim + qk_rope_head_dim, the query/key width of the prefill's attention), a
multimodal checkpoint's text_config (Gemma 3, Mistral Small 3.1: the language model only; the vision
encoder's parameters are not counted), layer_types or sliding_window_pattern for how many layers use the
sliding window, model_max_length for the context where a config gives it (Command R: vLLM serves it rather than
max_position_embeddings). Architectures the spec cannot express are refused with the field that declares them and
why, rather than sized as if they were something else.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ttftsim.config.dtypes import HF_TORCH_DTYPES
from ttftsim.config.loading import validation_error
from ttftsim.errors import InputError
from ttftsim.model.spec import ModelSpec

# (field, why the spec cannot express a config that sets it): the first one present and truthy is the error
_UNSUPPORTED: tuple[tuple[str, str], ...] = (
    ("mlp_only_layers", "dense layers among the MoE layers are not modelled (only leading dense layers are)"),
    ("layers_block_type", "hybrid attention / state-space layer stacks (Mamba, Nemotron-H) are not modelled"),
)
_HYBRID_LAYERS = {"linear_attention", "mamba", "conv", "recurrent"}
# Families whose window alternates with full attention by rule rather than by a layer_types list
_WINDOW_PATTERN = {"gemma2": 2}
# model_types whose transformers config ties the LM head to the embedding when tie_word_embeddings is left out
# (transformers' CohereConfig, Cohere2Config, GemmaConfig, Gemma2Config, Gemma3TextConfig: tie_word_embeddings=True)
_TIED_BY_DEFAULT = {"cohere", "cohere2", "gemma", "gemma2", "gemma3_text", "gemma3"}


def _unsupported(config: dict[str, Any]) -> tuple[str, str] | None:
    for field, why in _UNSUPPORTED:
        if config.get(field):
            return field, why
    if config.get("interleave_moe_layer_step") == 0:  # vLLM llama4.py: no MoE layer at all
        return "interleave_moe_layer_step", "0: every layer a dense MLP of intermediate_size_mlp is not modelled"
    step = config.get("moe_layer_freq")  # DeepSeek-V2: MoE where layer_idx % freq == 0 past the dense ones
    if isinstance(step, int) and step > 1:
        return "moe_layer_freq", f"MoE on every {step}th layer counted from the first dense one is not modelled"
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list) and _HYBRID_LAYERS & {str(kind) for kind in layer_types}:
        return "layer_types", "layers other than attention (linear attention, Mamba) are not modelled"
    return None


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's fields of a multimodal config (text_config), with the top level's dtype and
    quantization when the text part leaves them out."""
    text = config.get("text_config")
    if not isinstance(text, dict) or "hidden_size" in config:
        return dict(config)
    inherited: dict[str, Any] = {
        key: config[key] for key in ("torch_dtype", "dtype", "quantization_config") if key in config
    }
    return inherited | text


def _sliding_window_layers(data: dict[str, Any]) -> int | None:
    """How many layers use the window: from layer_types, from the family's alternation, else all (None)."""
    given = data.get("num_sliding_window_layers")
    if isinstance(given, int) or data.get("sliding_window") is None:
        return given if isinstance(given, int) else None
    layer_types = data.get("layer_types")
    if isinstance(layer_types, list):
        return sum(1 for kind in layer_types if kind == "sliding_attention")
    pattern = _WINDOW_PATTERN.get(str(data.get("model_type")), data.get("sliding_window_pattern"))
    layers = data.get("num_hidden_layers")
    if isinstance(pattern, int) and pattern > 1 and isinstance(layers, int):
        return layers - layers // pattern  # every pattern-th layer attends globally
    return None


def _context_length(data: dict[str, Any]) -> Any:
    """The context vLLM serves: model_max_length where the config gives one (Command R/R+: 8192 positions,
    131072 served; vLLM's _get_and_verify_max_len takes it over max_position_embeddings), else
    max_position_embeddings (2048 when left out, as vLLM assumes with a warning), scaled by rope_scaling as
    _get_and_verify_max_len scales it (vllm/config/model.py): a rope type other than su, longrope and llama3 multiplies
    by its factor (1 when it gives none), yarn from original_max_position_embeddings (Qwen2.5's yarn factor 4 on
    32,768 positions: 131,072)."""
    given = data.get("model_max_length")
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    length = data.get("max_position_embeddings", 2048)
    rope = data.get("rope_scaling")
    if "gemma3" in str(data.get("model_type")):  # its max_position_embeddings is already the scaled one (vLLM skips it)
        rope = None
    if not isinstance(rope, dict) or not isinstance(length, int) or isinstance(length, bool):
        return length
    kind = rope.get("rope_type", rope.get("type"))
    factor = rope.get("factor", 1.0)
    if kind in ("su", "longrope", "llama3") or not _is_number(factor):
        return length
    if kind == "yarn" and _is_number(rope.get("original_max_position_embeddings")):
        length = rope["original_max_position_embeddings"]
    return int(length * factor)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _with_hf_defaults(config: dict[str, Any], name: str) -> dict[str, Any]:
    """Fill the defaults transformers applies when a config.json leaves a field out."""
    data = _text_config(config)
    data["name"] = name
    heads = data.get("num_attention_heads")
    data.setdefault("num_key_value_heads", heads)
    if data.get("head_dim") is None and isinstance(heads, int) and heads > 0:
        hidden = data.get("hidden_size")
        if isinstance(hidden, int):
            data["head_dim"] = hidden // heads
    data.setdefault("tie_word_embeddings", str(data.get("model_type")) in _TIED_BY_DEFAULT)
    data["max_position_embeddings"] = _context_length(data)
    data["num_local_experts"] = (
        data.get("num_local_experts") or data.get("num_experts") or data.get("n_routed_experts") or 1
    )
    data["num_experts_per_tok"] = data.get("num_experts_per_tok") or 1
    if data["num_local_experts"] > 1:
        _moe_layout(data)
    if data.get("kv_lora_rank"):
        _mla_widths(data)
    torch_dtype = data.get("torch_dtype") or data.get("dtype") or "bfloat16"
    data["native_dtype"] = HF_TORCH_DTYPES.get(str(torch_dtype), "bf16")
    if str(data.get("model_type")) in ("qwen2", "qwen2_moe") and not data.get("use_sliding_window"):
        data["sliding_window"] = None  # Qwen2 configs carry a window they do not use unless use_sliding_window
    data["num_sliding_window_layers"] = _sliding_window_layers(data)
    if data.get("attention_chunk_size"):  # Llama 4: every 4th layer global without RoPE, the others chunked
        layers = data.get("num_hidden_layers")
        interval = data.get("nope_layer_interval") or 4
        if isinstance(layers, int) and isinstance(interval, int):
            data["num_chunked_layers"] = layers - layers // interval
    quantization = data.get("quantization_config")
    if isinstance(quantization, dict):
        method = str(quantization.get("quant_method") or "unnamed")
        if method in ("fp8", "mxfp4"):  # our weight formats: fp8 (DeepSeek-V3's 128x128 blocks), MXFP4 (gpt-oss)
            data["native_dtype"] = method
        else:
            data["quantization_method"] = method
    return data


def _moe_layout(data: dict[str, Any]) -> None:
    """An MoE config's widths: the experts' (moe_intermediate_size), the shared expert's, the dense layers'
    (leading: the config's intermediate_size, which is otherwise unused; interleaved: Llama 4's
    intermediate_size_mlp, Qwen2-MoE's intermediate_size), and the interleave step."""
    dense_width = data.get("intermediate_size")
    expert_width = data.get("moe_intermediate_size")
    if expert_width:
        data["intermediate_size"] = expert_width
    shared = data.get("n_shared_experts")
    if data.get("model_type") == "llama4_text":  # one shared expert of the experts' width (vLLM Llama4MoE)
        data["shared_expert_intermediate_size"] = dense_width
    elif isinstance(shared, int) and shared > 0 and isinstance(expert_width, int):
        data["shared_expert_intermediate_size"] = shared * expert_width  # DeepSeek: n copies of an expert
    elif data.get("shared_expert_intermediate_size"):
        data["shared_expert_gate"] = True  # Qwen2-MoE: one shared expert behind a sigmoid gate
    dense = data.get("first_k_dense_replace")
    if isinstance(dense, int) and dense > 0:
        data["num_dense_layers"] = dense
        data["dense_intermediate_size"] = dense_width
    step = data.get("interleave_moe_layer_step") or data.get("decoder_sparse_step")
    if isinstance(step, int) and step > 1:  # Llama 4 Maverick, Qwen2-MoE: MoE where (layer + 1) % step == 0
        data["moe_layer_step"] = step
        data["dense_intermediate_size"] = data.get("intermediate_size_mlp") or dense_width


def _mla_widths(data: dict[str, Any]) -> None:
    """Multi-head latent attention: the query/key head is the no-RoPE and RoPE parts together (192 in
    DeepSeek-V3), every query head has its own key and value after the up-projection (num_key_value_heads =
    heads), and q_lora_rank 0 or null means the queries come from the hidden state directly (V2-Lite)."""
    nope, rope = data.get("qk_nope_head_dim"), data.get("qk_rope_head_dim")
    if isinstance(nope, int) and isinstance(rope, int):
        data["head_dim"] = nope + rope
    data["num_key_value_heads"] = data.get("num_attention_heads")
    if not data.get("q_lora_rank"):
        data["q_lora_rank"] = None


SHAPE_FIELDS = ("hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers", "head_dim")
# integers the spec would otherwise coerce ("128256" read as a number, true as 1)
COUNT_FIELDS = ("vocab_size", "intermediate_size", "max_position_embeddings", "model_max_length", "num_experts_per_tok")
TORCH_DTYPES = ("bfloat16", "float16", "float32")  # float32 served in 16 bits, as vLLM's auto dtype does


def spec_from_hf_config(config: dict[str, Any], name: str, source: str) -> ModelSpec:
    """Build a ModelSpec from a parsed config.json; errors name the source file and field."""
    refused = _unsupported(_text_config(config))
    if refused is not None:
        field, why = refused
        raise InputError(
            source, field, f"{why}: {name} cannot be sized (ttftsim/model/presets/PRESETS.md lists what can)"
        )
    text = _text_config(config)
    for field in SHAPE_FIELDS + COUNT_FIELDS:  # the derived fields (head_dim, ...) would be reported missing instead
        value = text.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InputError(source, field, f"must be an integer, got {value!r}")
    tied = text.get("tie_word_embeddings")
    if tied is not None and not isinstance(tied, bool):
        raise InputError(source, "tie_word_embeddings", f"must be true or false, got {tied!r}")
    dtype = text.get("torch_dtype") or text.get("dtype")
    if dtype is not None and str(dtype) not in TORCH_DTYPES:  # vLLM's dtype check refuses it too
        field = "torch_dtype" if text.get("torch_dtype") else "dtype"
        raise InputError(source, field, f"{dtype!r} is not a torch dtype of a checkpoint ({', '.join(TORCH_DTYPES)})")
    try:
        return ModelSpec.model_validate(_with_hf_defaults(config, name))
    except ValidationError as exc:
        raise validation_error(source, exc) from None
