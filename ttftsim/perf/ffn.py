"""The MLPs of all layers on one tensor-parallel rank, as the iteration model times them.

A dense model: one gated MLP per layer (gate-up and down GEMMs over this rank's share of the width). An MoE
model: on each MoE layer the router GEMM and one fused kernel pair over the experts the batch hits (vLLM
fused_experts; kernels.py); its shared experts (DeepSeek: n_shared_experts x moe_intermediate_size; Qwen2-MoE:
shared_expert_intermediate_size behind a sigmoid gate) as an always-active gated MLP sharded like a dense one
(vLLM 0.15.1 deepseek_v2.py DeepseekV2MoE.shared_experts, a DeepseekV2MLP with reduce_results=False summed
into the routed output before the layer's one all-reduce; qwen2_moe.py Qwen2MoeSparseMoeBlock.shared_expert
and shared_expert_gate); and on its first num_dense_layers layers (first_k_dense_replace) a dense MLP of
dense_intermediate_size instead (deepseek_v2.py DeepseekV2DecoderLayer: DeepseekV2MoE only from layer
first_k_dense_replace on), or on every layer but each moe_layer_step-th (llama4.py Llama4DecoderLayer: a
LlamaMLP of intermediate_size_mlp unless (layer + 1) % interleave_moe_layer_step == 0; Qwen2-MoE's
decoder_sparse_step alike).

Expert parallelism (vLLM --enable-expert-parallel; 0.15.1 model_executor/layers/fused_moe/config.py
FusedMoEParallelConfig.make: ep_size = TP x DP, the MoE layer's own TP size 1): each GPU holds whole experts,
E // ep_size of them and one more on the first E mod ep_size ranks (fused_moe/layer.py determine_expert_map,
"linear" placement), and runs the fused kernel over the picks routed to them. The layer ends in the same
all-reduce, so the step waits for the busiest GPU: the one holding the most experts, with the expected
maximum of the ranks' picks under uniform top-k routing (mean + sigma x the expected maximum of ep_size
standard normals, Blom's approximation) - the floor real routers stay above (DeepSeek's EPLB exists because
expert loads skew); no published skew was found to cite as a default, so none is added. With DP ranks
(dp > 1) the tokens of every DP rank meet in each MoE layer through vLLM's default all2all_backend
"allgather_reducescatter" (config/parallel.py; distributed/device_communicators/all2all.py AgRsAll2AllManager:
dispatch = all-gather of the hidden states and router logits over the DP group, combine = reduce-scatter of
the outputs), each DP rank assumed to carry a batch like this one; the engine itself runs one DP rank.

MXFP4 experts run at the shape vLLM pads them to (config/dtypes.py mxfp4_expert_padding): its MoE kernels take
the padded hidden size and slice of the intermediate size as their problem shape (the hidden states padded with
zeros to match: fused_moe/layer.py forward), so the padded weights are read and multiplied like the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from ttftsim.config.dtypes import NO_PADDING, ComputeDtype, ExpertPadding
from ttftsim.config.hardware import HardwareProfile, Link
from ttftsim.model.spec import ModelSpec
from ttftsim.perf.kernels import KernelCosts, MoeShape

ACTIVATION_BYTES = 2  # hidden states and router logits travel in bf16


@dataclass(frozen=True)
class ExpertParallel:
    """Routed experts split over `ep_size` GPUs; `dp` DP ranks exchanging tokens over `link`."""

    ep_size: int
    dp: int
    link: Link
    link_efficiency: float
    imbalance: float | None = None  # the busiest GPU's picks over the mean; None: uniformly random routing


def local_experts(num_experts: int, ep_size: int) -> int:
    """Experts on the GPU holding the most: E // ep_size, one more when E mod ep_size > 0 (vLLM
    determine_expert_map gives the remainder to the first ranks)."""
    return num_experts // ep_size + (1 if num_experts % ep_size else 0)


def busiest_rank_picks(picks: int, ep_size: int, share: float, imbalance: float | None = None) -> float:
    """Expected picks (token-expert pairs) on the busiest of ep_size GPUs when each of `picks` lands on a
    given GPU with probability `share`: mean + sigma x E[max of ep_size standard normals] (Blom), capped at
    all the picks. With a measured `imbalance` (the busiest GPU's load over the mean, the inverse of vLLM
    EPLB's logged balancedness, mean / max), mean x imbalance instead, capped the same way."""
    if ep_size <= 1:
        return float(picks)
    if imbalance is not None:
        return min(float(picks), picks * share * imbalance)
    mean, sigma = picks * share, math.sqrt(picks * share * (1.0 - share))
    expected_max = NormalDist().inv_cdf((ep_size - 0.375) / (ep_size + 0.25))
    return min(float(picks), mean + sigma * expected_max)


def all2all_bytes_per_token(hidden: int, num_experts: int, dp: int) -> tuple[int, int]:
    """Bytes one GPU receives (dispatch: the other DP ranks' hidden states and router logits, all-gathered)
    and sends (combine: its share of the reduce-scatter) per token of its own batch, per MoE layer."""
    return (dp - 1) * (hidden + num_experts) * ACTIVATION_BYTES, (dp - 1) * hidden * ACTIVATION_BYTES


class FfnCosts:
    """Seconds of each layer kind's MLP, summed over the layers, per operator class."""

    def __init__(
        self,
        spec: ModelSpec,
        tp: int,
        costs: KernelCosts,
        dtype: ComputeDtype,
        weight_bytes: float,
        expert_weight_bytes: float | None = None,
        expert_padding: ExpertPadding = NO_PADDING,
    ) -> None:
        """weight_bytes: a dense linear's bytes per weight; expert_weight_bytes the routed experts' (None: the
        same; MXFP4 quantizes the experts alone); expert_padding the multiples vLLM pads their shape to."""
        self.spec = spec
        self.tp = tp
        self.costs = costs
        self.dtype = dtype
        self.weight_bytes = weight_bytes
        self.expert_weight_bytes = weight_bytes if expert_weight_bytes is None else expert_weight_bytes
        self.expert_padding = expert_padding
        self.inter = spec.intermediate_size // tp
        self.dense_inter = (spec.dense_intermediate_size or 0) // tp
        self.shared_inter = spec.shared_expert_intermediate_size // tp
        self.experts = self._moe_shape(spec.num_local_experts, tp)
        self.ep: ExpertParallel | None = None

    def _moe_shape(self, num_experts: int, slices: int) -> MoeShape:
        """The fused-MoE kernel's shape on one GPU holding `num_experts` experts, each sliced `slices` ways along
        its intermediate dimension, as vLLM pads it (FusedMoE's intermediate_size_per_partition, intermediate
        // slices, and the hidden size rounded up to the padding's multiples)."""
        spec, padding = self.spec, self.expert_padding
        return MoeShape(
            num_experts,
            spec.num_experts_per_tok,
            padding.padded_hidden(spec.hidden_size),
            padding.padded_intermediate(spec.intermediate_size // slices),
            self.expert_weight_bytes,
            self.dtype,
        )

    def expert_parallel(self, ep_size: int, dp: int, hardware: HardwareProfile, imbalance: float | None = None) -> None:
        """Split the routed experts whole over ep_size GPUs (full expert width, the busiest GPU's experts); the
        DP group talks over NVLink within a node, the network beyond."""
        link = hardware.intra_node_link if ep_size <= hardware.gpus_per_node else hardware.inter_node_link
        self.ep = ExpertParallel(ep_size, dp, link, hardware.roofline.link_efficiency, imbalance)
        self.experts = self._moe_shape(local_experts(self.spec.num_local_experts, ep_size), 1)

    def sliced_over_dp(self, dp: int, hardware: HardwareProfile) -> None:
        """An MoE model's DP engines without expert parallelism: every routed expert sliced over TP x DP GPUs,
        every rank's tokens gathered through them (the dispatch and combine as with EP)."""
        group = self.tp * dp
        link = hardware.intra_node_link if group <= hardware.gpus_per_node else hardware.inter_node_link
        self.ep = ExpertParallel(1, dp, link, hardware.roofline.link_efficiency)
        self.experts = self._moe_shape(self.spec.num_local_experts, group)

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
        ep = self.ep
        if ep is None:
            return router + self.costs.moe_s(tokens, experts.experts_hit(tokens), experts)
        if ep.ep_size > 1:
            return self._expert_parallel_s(tokens)
        gathered = tokens * ep.dp  # sliced over TP x DP: every rank's (padded) tokens through this GPU's slices
        return router + self.costs.moe_s(gathered, experts.experts_hit(gathered), experts)

    def _expert_parallel_s(self, tokens: int) -> float:
        """The router over this rank's tokens, then the fused kernel on the busiest GPU: every DP rank's tokens
        (as many as these) meet there, and the picks its experts receive run as ceil(picks / top_k) tokens."""
        spec, ep, local = self.spec, self.ep, self.experts
        assert ep is not None
        total_experts, top_k, h = spec.num_local_experts, spec.num_experts_per_tok, spec.hidden_size
        router = self.costs.gemm_s(tokens, total_experts, h, "bf16", total_experts * h * 2.0)
        gathered = tokens * ep.dp
        picks = busiest_rank_picks(gathered * top_k, ep.ep_size, local.num_experts / total_experts, ep.imbalance)
        hit = local.num_experts * (1.0 - (1.0 - top_k / total_experts) ** gathered)
        return router + self.costs.moe_s(math.ceil(picks / top_k), hit, local)

    def all2all_s(self, tokens: int) -> float:
        """Dispatch (all-gather) and combine (reduce-scatter) of one MoE layer over the DP group (0 without)."""
        ep = self.ep
        if ep is None or ep.dp <= 1 or tokens <= 0:
            return 0.0
        dispatch, combine = all2all_bytes_per_token(self.spec.hidden_size, self.spec.num_local_experts, ep.dp)
        bandwidth = ep.link.bw_bytes_per_s * ep.link_efficiency
        return 2 * ep.link.latency_s + tokens * (dispatch + combine) / bandwidth

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
        if self.ep is not None and self.ep.dp > 1:
            parts["all2all"] = spec.num_moe_layers * self.all2all_s(tokens)
        if spec.num_dense_mlp_layers:
            parts["mlp"] = spec.num_dense_mlp_layers * self._with_activation_s(tokens, self.dense_inter)
        if self.shared_inter:
            shared = self._with_activation_s(tokens, self.shared_inter)
            if spec.shared_expert_gate:
                shared += self.costs.gemm_s(tokens, 1, spec.hidden_size, "bf16", 2.0 * spec.hidden_size)
            parts["shared_experts"] = spec.num_moe_layers * shared
        return parts
