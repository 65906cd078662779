"""What a model's config.json declares that the simulator reads but does not model (wholly or in part), as one
warning each, so that a run says so instead of silently predicting without it: sliding-window KV blocks kept where
vLLM frees them (a model whose layers all share one window, served with KV offloading or LMCache, or a static KV
cache), the checkpoint's own quantization_config (other than fp8 and MXFP4, weight formats of ours), and Llama 4's
chunked local attention
(attention_chunk_size on three layers in four; vLLM 0.15.1 llama4.py Llama4Attention, ChunkedLocalAttention).

Of a sliding window, the attention cost (perf/attention.py), vLLM's KV-cache groups (perf/kv_groups.py) and the
freeing of the blocks that fall out of the window (kvcache/windowed.py, as vLLM's SlidingWindowManager) are
modelled. The windowed KV manager does not run beside the CPU tier or LMCache: there the windowed layers keep every
token, which is what vLLM does too for a model with full-attention layers as well (a KV connector turns its hybrid
manager off), but not for one whose layers all share the window. A window or chunk only matters for contexts longer
than it, so it warns only when the engine admits such contexts (max_model_len above the window).
"""

from __future__ import annotations

from ttftsim.model.spec import ModelSpec

# A checkpoint format our weight dtypes lack, and the one that sizes it closest
CLOSEST_DTYPE = {"awq": "int4", "gptq": "int4"}


def model_warnings(spec: ModelSpec, max_model_len: int, weight_dtype: str, window_kept: bool = False) -> list[str]:
    """The warnings for this model served with this max_model_len and weight format (empty: nothing ignored);
    window_kept: the engine keeps the windowed layers' tokens where vLLM frees them (replica.window_kept)."""
    warnings = []
    if max_model_len > spec.max_position_embeddings:  # only with allow_long_max_model_len (resolve_engine)
        warnings.append(
            f"max_model_len {max_model_len:,} exceeds {spec.name}'s max_position_embeddings "
            f"{spec.max_position_embeddings:,} (VLLM_ALLOW_LONG_MAX_MODEL_LEN): vLLM starts, warning that outputs "
            f"may be wrong or CUDA errors may follow; predicted at {max_model_len:,} tokens"
        )
    window = spec.sliding_window
    if window_kept and window is not None and window < max_model_len and spec.num_sliding_window_layers != 0:
        warnings.append(
            f"sliding_window={window} ({_where(spec)}) is modelled in attention time but not in the KV cache of "
            f"this engine (KV offloading, LMCache or a static cache): the windowed layers keep every token, where "
            f"vLLM frees the blocks that fall out of the window, so contexts longer than {window:,} tokens "
            f"(max_model_len {max_model_len:,}) hold more KV blocks than in vLLM (fewer requests fit, preemption "
            f"comes sooner); exact up to {window:,} tokens"
        )
    chunk = spec.attention_chunk_size
    if chunk is not None and chunk < max_model_len and spec.num_chunked_layers:
        warnings.append(
            f"attention_chunk_size={chunk} ({spec.name}, {spec.num_chunked_layers} of {spec.num_hidden_layers} "
            f"layers) is parsed but not modelled: those layers attend within chunks of {chunk:,} tokens and vLLM "
            f"keeps only the current chunk's KV there, but here attention spans the whole context and the KV cache "
            f"keeps every token, so contexts longer than {chunk:,} tokens (max_model_len {max_model_len:,}) get "
            f"attention time and KV-cache use over-estimated; exact up to {chunk:,} tokens"
        )
    if spec.quantization_method is not None and weight_dtype == spec.native_dtype:
        closest = CLOSEST_DTYPE.get(spec.quantization_method.lower())
        hint = f" (closest for {spec.quantization_method}: quantization: {closest})" if closest else ""
        warnings.append(
            f"quantization_config (quant_method {spec.quantization_method}) of {spec.name} is parsed but not "
            f"modelled: weights are sized and read as {weight_dtype} (torch_dtype); set the engine's quantization "
            f"(vllm --quantization) to model the quantized checkpoint{hint}"
        )
    return warnings


def _where(spec: ModelSpec) -> str:
    """The model, and the layers the window applies to when it is not all of them."""
    layers = spec.num_sliding_window_layers
    if layers is None or layers == spec.num_hidden_layers:
        return spec.name
    return f"{spec.name}, {layers} of {spec.num_hidden_layers} layers"
