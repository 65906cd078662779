"""Number formats of weights, activations and the KV cache, and the bytes each one takes.

Weight formats follow what vLLM serves: bf16/fp16, fp8 (per-channel scales, negligible), int8 (W8A8,
per-channel scales), int4 (GPTQ/AWQ style: 4-bit values plus one fp16 scale per group of 128 weights), mxfp4
(OCP microscaling: 4-bit floats plus one 8-bit E8M0 scale per block of 32 weights, 4.25 bits a weight).
Quantization applies to the transformer blocks' linear layers; embeddings and the LM head stay in the
activation dtype, as GPTQ/AWQ/fp8 checkpoints do. MXFP4 applies to the routed experts alone: vLLM's Mxfp4Config
quantizes FusedMoE layers and leaves every other linear unquantized (model_executor/layers/quantization/mxfp4.py
get_quant_method), as gpt-oss's checkpoint keeps attention, router, embeddings and LM head in bf16; its GEMMs
dequantize to bf16 (Marlin or Triton on Hopper and earlier). vLLM pads MXFP4 experts to its MoE kernel's tiles
when it allocates them, by GPU and release (mxfp4_expert_padding); ROCm's padding (its own per-architecture
alignments) is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ttftsim.config.versions import at_least

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


@dataclass(frozen=True)
class ExpertPadding:
    """The multiples vLLM rounds one GPU's routed-expert tensors up to when it allocates them: the hidden size and
    the GPU's slice of the intermediate size (1: the checkpoint's shape). The block scales and biases take the
    padded shape too, and the MoE kernel runs over it (the hidden states padded to match)."""

    hidden: int = 1
    intermediate: int = 1

    def padded_hidden(self, hidden_size: int) -> int:
        return -(-hidden_size // self.hidden) * self.hidden

    def padded_intermediate(self, slice_size: int) -> int:
        """One GPU's slice of the intermediate size (FusedMoE's intermediate_size_per_partition), padded."""
        return -(-slice_size // self.intermediate) * self.intermediate


NO_PADDING = ExpertPadding()
MARLIN_PADDING = ExpertPadding(hidden=256, intermediate=128)  # its tiles: n % 256 == 0 and k % 128 == 0
TRITON_PADDING = ExpertPadding(intermediate=64)  # matmul_ogs: 2 x the 32-value block
TRTLLM_PADDING = ExpertPadding(hidden=256, intermediate=256)
TRTLLM_PADDING_0_27 = ExpertPadding(hidden=256, intermediate=128)


def mxfp4_expert_padding(compute_capability: str | None, vllm_version: str) -> ExpertPadding:
    """How vLLM pads MXFP4 experts on a GPU of this CUDA compute capability: the padding of the MoE backend it
    picks there by default (vllm/model_executor/layers/quantization/mxfp4.py Mxfp4MoEMethod.create_weights and
    the backend choice before it, 0.10.1-0.15.1; fused_moe/oracle/mxfp4.py select_mxfp4_moe_backend and
    mxfp4_round_up_hidden_size_and_intermediate_size, 0.23-0.34; each release's PyPI wheel read):
    - Marlin (hidden to 256, intermediate to 128) below Hopper (Ampere, Ada) and on consumer Blackwell (12.x) in
      every release, and on Hopper and Blackwell 10.3 before 0.12: 0.10.1 pins torch 2.7.1 (Triton's path needs
      2.8) and 0.10.2-0.11 do not ship triton_kernels (a dependency, vendored as vllm/third_party, from 0.12);
    - Triton's matmul_ogs (intermediate to 64) on Hopper from 0.12, and on 10.3 in 0.12 (FlashInfer took only
      capability 10.0 until 0.13's is_device_capability_family(100));
    - FlashInfer's TRT-LLM kernel on datacenter Blackwell (hidden to 256; intermediate to 256, to 128 from 0.27),
      FlashInfer installed (a dependency from 0.11.1, an extra before).
    None (ROCm, a CPU): the checkpoint's shape. Environment switches (VLLM_MXFP4_USE_MARLIN,
    VLLM_USE_FLASHINFER_MOE_MXFP4_*) and LoRA's backend are not modelled."""
    if compute_capability is None:
        return NO_PADDING
    major, minor = (int(part) for part in compute_capability.split("."))
    if major == 9 or (major == 10 and minor > 0 and not at_least(vllm_version, (0, 13))):
        return TRITON_PADDING if at_least(vllm_version, (0, 12)) else MARLIN_PADDING
    if major == 10:
        return TRTLLM_PADDING_0_27 if at_least(vllm_version, (0, 27)) else TRTLLM_PADDING
    return MARLIN_PADDING
