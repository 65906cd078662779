"""Multi-head latent attention (DeepSeek V2/V3/R1, Kimi K2) on one tensor-parallel rank, as vLLM runs it.

Sources (vLLM 0.15.1): vllm/model_executor/models/deepseek_v2.py DeepseekV2MLAAttention (fused_qkv_a_proj =
q_a_proj + kv_a_proj_with_mqa, replicated on every rank (disable_tp); q_b_proj, or q_proj without
q_lora_rank, and kv_b_proj column-parallel over the heads; o_proj row-parallel) and
vllm/model_executor/layers/attention/mla_attention.py (its module docstring, MLACommonImpl._forward_prefill,
_compute_prefill_context, MLACommonImpl.forward, MLACommonBaseImpl.process_weights_after_loading).

- Prefill ("_forward_prefill", the compute-friendly path): kv_b_proj up-projects the latent of every token the
  prefill attends to (its new tokens, and its cached context chunk by chunk) into per-head K (nope) and V,
  then FlashAttention runs as multi-head attention with a query/key width of qk_nope + qk_rope (192) and a
  value width of v_head_dim (128), K and V in 16 bits.
- Decode ("_forward_decode", the data-movement-friendly path, for the decode tokens): the up-projection is
  absorbed into the query and the output (q_nope x W_UK and attention-output x W_UV, batched GEMMs on 16-bit
  copies of kv_b_proj's weights), so attention is multi-query over the cached latent: per query head a
  query/key width of kv_lora_rank + qk_rope (576) and a value width of kv_lora_rank (512), one cached vector
  of 576 elements per token read once in the KV-cache dtype.

The MLA attention kernels (FlashMLA, CUTLASS MLA, FlashAttention MLA) are not in the calibration tables,
which were measured on standard attention: the IterationModel times MLA attention on the roofline.
Left out: the latent layernorm and RoPE as separate launches (counted as memory traffic in the iteration's
element-wise kernels), DeepSeek-V3.2's sparse indexer, decode context parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.config.dtypes import ComputeDtype
from ttftsim.model.spec import ModelSpec
from ttftsim.perf.kernels import AttentionShape, KernelCosts

LATENT_BYTES = 2  # the up-projected K, V of the prefill path and the absorbed weights are 16-bit


@dataclass(frozen=True, slots=True)
class MlaLayer:
    """One MLA layer's widths on one GPU: `heads` query heads after TP sharding."""

    heads: int
    hidden: int
    q_lora_rank: int  # 0: queries projected from the hidden state directly (DeepSeek-V2-Lite)
    kv_lora_rank: int
    nope: int
    rope: int
    v: int

    @classmethod
    def of(cls, spec: ModelSpec, tp: int) -> MlaLayer:
        return cls(
            heads=spec.num_attention_heads // tp,
            hidden=spec.hidden_size,
            q_lora_rank=spec.q_lora_rank or 0,
            kv_lora_rank=spec.kv_lora_rank or 0,
            nope=spec.qk_nope_head_dim,
            rope=spec.qk_rope_head_dim,
            v=spec.v_head_dim,
        )

    def prefill_shape(self) -> AttentionShape:
        """Multi-head attention over the up-projected K and V (16-bit)."""
        return AttentionShape(self.heads, self.heads, self.nope + self.rope, LATENT_BYTES, v_head_dim=self.v)

    def decode_shape(self, kv_bytes: int) -> AttentionShape:
        """Multi-query attention over the cached latent (one vector per token, in the KV-cache dtype)."""
        latent = self.kv_lora_rank + self.rope
        return AttentionShape(self.heads, 1, latent, kv_bytes, v_head_dim=self.kv_lora_rank, latent=True)

    def rope_and_cache_bytes(self, kv_bytes: int) -> float:
        """Bytes per token of the small kernels around attention: RoPE on the queries' and the key's rope
        parts, the latent (and query latent) RMSNorm, the cache write of one latent."""
        rope = 4.0 * (self.heads + 1) * self.rope
        norms = 4.0 * (self.kv_lora_rank + self.q_lora_rank)
        return rope + norms + float(kv_bytes * (self.kv_lora_rank + self.rope))


class MlaCosts:
    """The GEMMs of one MLA layer on one GPU under a KernelCosts; seconds per layer."""

    def __init__(self, layer: MlaLayer, costs: KernelCosts, dtype: ComputeDtype, weight_bytes: float) -> None:
        self.layer = layer
        self.costs = costs
        self.dtype = dtype
        self.weight_bytes = weight_bytes

    def _gemm(self, m: int, n: int, k: int) -> float:
        return self.costs.gemm_s(m, n, k, self.dtype, n * k * self.weight_bytes)

    def projections_s(self, tokens: int) -> float:
        """The down-projections (replicated: the latent's and the query latent's) and the query up-projection
        (this GPU's heads)."""
        a = self.layer
        query = a.heads * (a.nope + a.rope)
        if a.q_lora_rank:
            return self._gemm(tokens, a.q_lora_rank + a.kv_lora_rank + a.rope, a.hidden) + self._gemm(
                tokens, query, a.q_lora_rank
            )
        return self._gemm(tokens, query, a.hidden) + self._gemm(tokens, a.kv_lora_rank + a.rope, a.hidden)

    def o_proj_s(self, tokens: int) -> float:
        return self._gemm(tokens, self.layer.hidden, self.layer.heads * self.layer.v)

    def up_projection_s(self, kv_tokens: int) -> float:
        """Prefill: kv_b_proj over every token the prefill attends to (new and cached), giving K nope and V."""
        a = self.layer
        return self._gemm(kv_tokens, a.heads * (a.nope + a.v), a.kv_lora_rank)

    def absorbed_s(self, seqs: int) -> float:
        """Decode: q_nope x W_UK_T into the latent space and the latent output x W_UV, batched GEMMs over this
        GPU's heads on 16-bit copies of kv_b_proj's weights (read once per step)."""
        a = self.layer
        n = a.heads * (a.nope + a.v)
        return self.costs.gemm_s(seqs, n, a.kv_lora_rank, "bf16", n * a.kv_lora_rank * float(LATENT_BYTES))
