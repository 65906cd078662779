"""What a model's config.json declares that the simulator reads but does not model (wholly or in part), as one
warning each, so that a run says so instead of silently predicting without it: the part of sliding-window
attention left out (Mistral v0.1, Qwen2 with use_sliding_window, Phi-3 4k; on some layers only: Gemma 2/3,
gpt-oss), the checkpoint's own quantization_config (gpt-oss's MXFP4), and Llama 4's chunked local attention
(attention_chunk_size on three layers in four; vLLM 0.15.1 llama4.py Llama4Attention, ChunkedLocalAttention).

Of a sliding window, the attention cost (perf/attention.py) and vLLM's KV-cache groups (perf/kv_groups.py) are
modelled; the KV manager still keeps every token in the windowed layers, where vLLM frees the blocks that fall
out of the window (v1/core/single_type_kv_cache_manager.py SlidingWindowManager.remove_skipped_blocks). A
window or chunk only matters for contexts longer than it, so it warns only when the engine admits such contexts
(max_model_len above the window).
"""

from __future__ import annotations

from ttftsim.model.spec import ModelSpec

# A checkpoint format our weight dtypes lack, and the one that sizes it closest: MXFP4 is 4-bit values with
# one shared 8-bit scale per 32 (4.25 bits a weight), int4 here 4-bit values with an fp16 scale per 128 (4.125).
CLOSEST_DTYPE = {"mxfp4": "int4", "fp8": "fp8", "awq": "int4", "gptq": "int4"}


def model_warnings(spec: ModelSpec, max_model_len: int, weight_dtype: str) -> list[str]:
    """The warnings for this model served with this max_model_len and weight format (empty: nothing ignored)."""
    warnings = []
    window = spec.sliding_window
    if window is not None and window < max_model_len and spec.num_sliding_window_layers != 0:
        warnings.append(
            f"sliding_window={window} ({_where(spec)}) is modelled in attention time but not in the KV cache: the "
            f"windowed layers keep every token, where vLLM frees the blocks that fall out of the window, so "
            f"contexts longer than {window:,} tokens (max_model_len {max_model_len:,}) hold more KV blocks than in "
            f"vLLM (fewer requests fit, preemption comes sooner); exact up to {window:,} tokens"
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
