"""Number formats of weights, activations and the KV cache, and the bytes each one takes.

Weight formats follow what vLLM serves: bf16/fp16, fp8 (per-channel scales, negligible), int8 (W8A8,
per-channel scales), int4 (GPTQ/AWQ style: 4-bit values plus one fp16 scale per group of 128 weights).
Quantization applies to the transformer blocks' linear layers; embeddings and the LM head stay in the
activation dtype, as GPTQ/AWQ/fp8 checkpoints do.
"""

from __future__ import annotations

from typing import Literal

WeightDtype = Literal["bf16", "fp16", "fp8", "int8", "int4"]
KvDtype = Literal["bf16", "fp16", "fp8"]
ComputeDtype = Literal["bf16", "fp16", "fp8", "int8", "fp32"]

INT4_GROUP_SIZE = 128
_SCALE_BYTES = 2  # one fp16 scale per int4 group

_WEIGHT_BYTES: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + _SCALE_BYTES / INT4_GROUP_SIZE,
}
_KV_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1}

HF_TORCH_DTYPES: dict[str, WeightDtype] = {"bfloat16": "bf16", "float16": "fp16"}


def weight_bytes_per_param(dtype: WeightDtype) -> float:
    """Bytes per quantized linear-layer weight, group scales included."""
    return _WEIGHT_BYTES[dtype]


def kv_bytes_per_element(dtype: KvDtype) -> int:
    return _KV_BYTES[dtype]


def gemm_compute_dtype(weight_dtype: WeightDtype) -> ComputeDtype:
    """The tensor-core format a GEMM with these weights runs in (int4 weights dequantize to bf16)."""
    if weight_dtype in ("fp8", "int8"):
        return weight_dtype
    if weight_dtype == "fp16":
        return "fp16"
    return "bf16"
