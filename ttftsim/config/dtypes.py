"""Number formats of weights, activations and the KV cache, and the bytes each one takes.

Weight formats follow what vLLM serves: bf16/fp16, fp8 (per-channel scales, negligible), int8 (W8A8,
per-channel scales), int4 (GPTQ/AWQ style: 4-bit values plus one fp16 scale per group of 128 weights), mxfp4
(OCP microscaling: 4-bit floats plus one 8-bit E8M0 scale per block of 32 weights, 4.25 bits a weight).
Quantization applies to the transformer blocks' linear layers; embeddings and the LM head stay in the
activation dtype, as GPTQ/AWQ/fp8 checkpoints do. MXFP4 applies to the routed experts alone: vLLM's Mxfp4Config
quantizes FusedMoE layers and leaves every other linear unquantized (model_executor/layers/quantization/mxfp4.py
get_quant_method), as gpt-oss's checkpoint keeps attention, router, embeddings and LM head in bf16; its GEMMs
dequantize to bf16 (Marlin or Triton on Hopper and earlier).
"""

from __future__ import annotations

from typing import Literal

WeightDtype = Literal["bf16", "fp16", "fp8", "int8", "int4", "mxfp4"]
KvDtype = Literal["bf16", "fp16", "fp8"]
ComputeDtype = Literal["bf16", "fp16", "fp8", "int8", "fp32"]

INT4_GROUP_SIZE = 128
MXFP4_BLOCK_SIZE = 32  # weights sharing one 8-bit scale
EXPERTS_ONLY: frozenset[str] = frozenset({"mxfp4"})  # formats that quantize the routed experts alone
_SCALE_BYTES = 2  # one fp16 scale per int4 group

_WEIGHT_BYTES: dict[str, float] = {
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + _SCALE_BYTES / INT4_GROUP_SIZE,
    "mxfp4": 0.5 + 1.0 / MXFP4_BLOCK_SIZE,
}
_KV_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1}

HF_TORCH_DTYPES: dict[str, WeightDtype] = {"bfloat16": "bf16", "float16": "fp16"}


def weight_bytes_per_param(dtype: WeightDtype) -> float:
    """Bytes per quantized linear-layer weight, group scales included."""
    return _WEIGHT_BYTES[dtype]


def dense_weight_dtype(dtype: WeightDtype) -> WeightDtype:
    """The format of the linears other than routed experts under this weight format (16 bits for MXFP4)."""
    return "bf16" if dtype in EXPERTS_ONLY else dtype


def kv_bytes_per_element(dtype: KvDtype) -> int:
    return _KV_BYTES[dtype]


def gemm_compute_dtype(weight_dtype: WeightDtype) -> ComputeDtype:
    """The tensor-core format a GEMM with these weights runs in (int4 and MXFP4 weights dequantize to bf16)."""
    if weight_dtype in ("fp8", "int8"):
        return weight_dtype
    if weight_dtype == "fp16":
        return "fp16"
    return "bf16"
