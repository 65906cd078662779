"""The MLPs of all layers on one tensor-parallel rank, as the iteration model times them.

A dense model: one gated MLP per layer (gate-up and down GEMMs over this rank's share of the width). An MoE
model: on each MoE layer the router GEMM and one fused kernel pair over the experts the batch hits (vLLM
fused_experts; kernels.py); its shared experts (DeepSeek: n_shared_experts x moe_intermediate_size; Qwen2-MoE:
shared_expert_intermediate_size behind a sigmoid gate) as an always-active gated MLP sharded like a dense one
(vLLM 0.15.1 deepseek_v2.py DeepseekV2MoE.shared_experts, a DeepseekV2MLP with reduce_results=False summed
into the routed output before the layer's one all-reduce; qwen2_moe.py Qwen2MoeSparseMoeBlock.shared_expert
and shared_expert_gate); and on its first num_dense_layers layers (first_k_dense_replace) a dense MLP of
dense_intermediate_size instead (deepseek_v2.py DeepseekV2DecoderLayer: DeepseekV2MoE only from layer
first_k_dense_replace on). Expert parallelism is not modelled: every rank holds a TP slice of every expert.
"""

from __future__ import annotations

from ttftsim.config.dtypes import ComputeDtype
from ttftsim.model.spec import ModelSpec
from ttftsim.perf.kernels import KernelCosts, MoeShape


class FfnCosts:
    """Seconds of each layer kind's MLP, summed over the layers, per operator class."""

    def __init__(self, spec: ModelSpec, tp: int, costs: KernelCosts, dtype: ComputeDtype, weight_bytes: float) -> None:
        self.spec = spec
        self.costs = costs
        self.dtype = dtype
        self.weight_bytes = weight_bytes
        self.inter = spec.intermediate_size // tp
        self.dense_inter = (spec.dense_intermediate_size or 0) // tp
        self.shared_inter = spec.shared_expert_intermediate_size // tp
        self.experts = MoeShape(
            spec.num_local_experts, spec.num_experts_per_tok, spec.hidden_size, self.inter, weight_bytes, dtype
        )

    def _gemm(self, m: int, n: int, k: int) -> float:
        return self.costs.gemm_s(m, n, k, self.dtype, n * k * self.weight_bytes)

    def swiglu_s(self, tokens: int, inter: int) -> float:
        """A dense gated MLP on this rank: gate-up (2 x inter) and down GEMMs."""
        h = self.spec.hidden_size
        return self._gemm(tokens, 2 * inter, h) + self._gemm(tokens, h, inter)

    def layer_s(self, tokens: int) -> float:
        """One layer's MLP of a dense model, or one MoE layer's router and fused routed experts."""
        spec, h = self.spec, self.spec.hidden_size
        if not spec.is_moe:
            return self.swiglu_s(tokens, self.inter)
        experts = self.experts  # one fused kernel pair over the experts hit, not one GEMM per expert
        router = self.costs.gemm_s(tokens, experts.num_experts, h, "bf16", experts.num_experts * h * 2.0)
        return router + self.costs.moe_s(tokens, experts.experts_hit(tokens), experts)

    def _with_activation_s(self, tokens: int, inter: int) -> float:
        """A gated MLP and its SiLU-mul (read 2, write 1 vectors of inter in bf16)."""
        return self.swiglu_s(tokens, inter) + self.costs.memory_s(6.0 * tokens * inter)

    def parts(self, tokens: int) -> dict[str, float]:
        """`mlp` for a dense model; `moe` (router + fused experts) on an MoE model's MoE layers, its leading
        dense layers' `mlp`, its shared experts (with Qwen2-MoE's sigmoid gate, a hidden -> 1 GEMM) in
        `shared_experts`."""
        spec = self.spec
        if not spec.is_moe:
            return {"mlp": spec.num_hidden_layers * self.layer_s(tokens)}
        parts = {"moe": spec.num_moe_layers * self.layer_s(tokens)}
        if spec.num_dense_layers:
            parts["mlp"] = spec.num_dense_layers * self._with_activation_s(tokens, self.dense_inter)
        if self.shared_inter:
            shared = self._with_activation_s(tokens, self.shared_inter)
            if spec.shared_expert_gate:
                shared += self.costs.gemm_s(tokens, 1, spec.hidden_size, "bf16", 2.0 * spec.hidden_size)
            parts["shared_experts"] = spec.num_moe_layers * shared
        return parts
