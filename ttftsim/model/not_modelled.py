"""What a model's config.json declares that the simulator reads but does not model, as one warning each, so
that a run says so instead of silently predicting without it: sliding-window attention (Mistral v0.1, Qwen2
with use_sliding_window) and the checkpoint's own quantization_config. A window only matters for contexts
longer than it, so it warns only when the engine admits such contexts (max_model_len above the window).
"""

from __future__ import annotations

from ttftsim.model.spec import ModelSpec


def model_warnings(spec: ModelSpec, max_model_len: int, weight_dtype: str) -> list[str]:
    """The warnings for this model served with this max_model_len and weight format (empty: nothing ignored)."""
    warnings = []
    window = spec.sliding_window
    if window is not None and window < max_model_len:
        warnings.append(
            f"sliding_window={window} ({spec.name}) is parsed but not modelled: attention spans the whole context "
            f"and the KV cache keeps every token, so contexts longer than {window:,} tokens (max_model_len "
            f"{max_model_len:,}) get attention time and KV-cache use over-estimated; exact up to {window:,} tokens"
        )
    if spec.quantization_method is not None and weight_dtype == spec.native_dtype:
        warnings.append(
            f"quantization_config (quant_method {spec.quantization_method}) of {spec.name} is parsed but not "
            f"modelled: weights are sized and read as {weight_dtype} (torch_dtype); set the engine's quantization "
            "(vllm --quantization) to model the quantized checkpoint"
        )
    return warnings
