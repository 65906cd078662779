"""Memory plan of one replica, mirroring vLLM's accounting (serving-semantics.md, part 3.1 item 8).

requested = ceil(device memory x gpu_memory_utilization); KV cache = requested - weights - peak
activation of a profiling forward pass at max_num_batched_tokens - non-torch memory (CUDA context, NCCL
buffers: the hardware profile's nccl_reserve_bytes_by_tp) - the CUDA-graph estimate. vLLM 0.34's extensible
KV cache (its default on GPUs, `measured_kv_sizing`) measures what the engine holds after warm-up and CUDA-graph
capture instead of estimating it, and keeps free a margin besides the peak (vllm/v1/worker/extensible_kv_cache.py
measure_kv_cache_bytes: min(requested - used, device - used - margin) - peak, margin = max(1 GiB (3 on ROCm),
0.75 x peak); gpu_memory_utilization unset means 1.0 there); with the same estimates for what it measures:
KV cache = min(requested, device memory - margin) - weights - non-torch - CUDA graphs - peak;
blocks = KV cache // (block_size x KV bytes per token on one GPU). KV bytes per token on one GPU are its
share of the KV heads, or for multi-head latent attention (DeepSeek V2/V3, Kimi K2) the whole latent of
kv_lora_rank + qk_rope_head_dim per layer: vLLM's MLA backends cache one latent per token that every TP rank
keeps in full (vLLM 0.15.1 vllm/attention/layer.py MLAAttention.get_kv_cache_spec:
MLAAttentionSpec(num_kv_heads=1, head_size=kv_lora_rank + qk_rope_head_dim); page bytes in
vllm/v1/kv_cache_interface.py MLAAttentionSpec.real_page_size_bytes, no factor 2 for K and V).
The activation peak and the fixed reserves are estimates (documented below), not vLLM's profiler. Weights are
what vLLM allocates: MXFP4 routed experts padded to its MoE kernel's tiles (config/dtypes.py mxfp4_expert_padding;
gpt-oss-120b on one A100 +5.5 GB), the rest at the checkpoint's size.

Sliding-window models (perf/kv_groups.py): vLLM's hybrid allocator groups the layers, each group holding its
own blocks, and pads the last group of each kind; a block here is one block in every group (block_size tokens
of group size x groups layer pages), so num_blocks = vLLM's num_blocks // groups and a token costs the padded
layers (Gemma-3-27b: 70 layer pages for its 62 layers). Which tokens the windowed groups can free is the KV
manager's (kvcache/windowed.py), not the plan's; the start-up check that one max_model_len sequence fits counts a
windowed layer's window only, as vLLM's does (one_sequence_bytes).

With pipeline parallelism each stage's GPUs hold their layers' weights (the first stage also the input
embedding, the last the final norm and the LM head, a second copy when the embeddings are tied) and KV for
their layers only (a model's leading dense layers, lighter than its MoE layers, counted as such); every worker
profiles its own memory and the engine takes the smallest block count of all
(vLLM v1/core/kv_cache_utils.py: one KV-cache config for every worker, at the minimum), so the stage with
the least room per layer decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ttftsim.config.dtypes import weight_bytes_per_param
from ttftsim.config.hardware import HardwareProfile
from ttftsim.model.size import (
    embedding_params,
    kv_bytes_per_token,
    layer_weight_bytes,
    padded_expert_params,
    weight_bytes,
)
from ttftsim.perf.ffn import local_experts
from ttftsim.perf.iteration import Deployment
from ttftsim.perf.kv_groups import KvCacheGroups

GB = 1e9
GIB = 2**30
CUDA_CONTEXT_BYTES = int(0.5 * GIB)  # torch/CUDA context and allocator slack, seen in vLLM start-up logs
CUDAGRAPH_BYTES = int(0.75 * GIB)  # vLLM logs "Graph capturing ... took 0.3-1.5 GiB" for 7B-70B models
SAMPLER_LOGIT_BYTES = 4  # the profiling run materialises fp32 logits for max_num_seqs sequences
# vLLM 0.34 KV_CACHE_MARGIN_FLOOR_BYTES: 1 GiB on CUDA, 3 GiB on ROCm (kernel scratch mapped outside the allocator)
EXTENSIBLE_MARGIN_FLOOR_BYTES = {"cuda": GIB, "rocm": 3 * GIB}


class DoesNotFitError(ValueError):
    """The configuration cannot run: the message gives the numbers."""


@dataclass(frozen=True)
class MemorySettings:
    """The engine arguments that shape memory (vLLM names)."""

    gpu_memory_utilization: float = 0.9
    max_num_batched_tokens: int = 2048
    max_num_seqs: int = 256
    block_size: int = 16
    max_model_len: int = 4096
    no_cuda_graphs: bool = False  # cudagraph_mode NONE (enforce_eager, -O0, ...): no graph memory
    hybrid_kv_cache: bool = True  # vLLM's hybrid KV-cache manager (off: --disable-hybrid-kv-cache-manager, connectors)
    measured_kv_sizing: bool = False  # vLLM >= 0.34's extensible KV cache (module docstring)
    lora_slots: int = 0  # max_loras with LoRA on: GPU slots for adapters of the deployment's lora_rank (lora_bytes)


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU bytes of each component and the resulting KV-cache size in blocks and tokens."""

    requested_bytes: int
    weight_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_cache_bytes: int
    kv_bytes_per_token: int  # on one GPU (its shard of KV heads; an MLA latent whole)
    block_size: int
    num_blocks: int  # blocks of block_size tokens in every KV-cache group (perf/kv_groups.py)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    def vllm_num_blocks(self, groups: KvCacheGroups) -> int:
        """vLLM's num_blocks under `groups` (its log's "GPU KV cache size" / block_size): blocks of one group,
        which every group draws from: KV memory // (block_size x group size layer pages)."""
        return self.kv_cache_bytes // (self.block_size * self.kv_bytes_per_token // groups.num_groups)


def kv_bytes_per_token_per_gpu(deployment: Deployment, layers: int | None = None) -> int:
    """KV bytes one token takes on one GPU: its shard of the KV heads, for `layers` layers (default all).
    An MLA model's latent is not split by heads: every TP rank caches all of it (vLLM MLAAttention.
    get_kv_cache_spec: MLAAttentionSpec with num_kv_heads=1, head_size kv_lora_rank + qk_rope_head_dim)."""
    spec = deployment.model
    full = kv_bytes_per_token(spec, deployment.kv_dtype)
    if spec.is_mla:
        per_gpu = full
    else:
        kv_heads_local = max(1, spec.num_key_value_heads // deployment.tp)
        per_gpu = full * kv_heads_local // spec.num_key_value_heads
    return per_gpu if layers is None else per_gpu * layers // spec.num_hidden_layers


def stage_kv_bytes_per_token(deployment: Deployment, layers: int, groups: KvCacheGroups) -> int:
    """KV bytes a token costs on one GPU of a stage of `layers` layers under vLLM's grouping: its share of the
    padded layers (group size x groups over the model's layers), one layer's bytes each."""
    num_layers = deployment.model.num_hidden_layers
    per_layer = kv_bytes_per_token_per_gpu(deployment) // num_layers
    return per_layer * -(-layers * groups.padded_layers // num_layers)


def proposer_bytes(deployment: Deployment) -> tuple[int, int]:
    """(weight bytes, KV bytes per token) on one GPU that speculative decoding's proposer adds: EAGLE,
    EAGLE-3 and MTP one decoder layer of the target's width (its KV too), a draft model its own weights and
    KV on the same TP group, n-gram nothing."""
    method = deployment.spec_method
    if method in ("", "ngram"):
        return 0, 0
    if deployment.draft is not None:
        draft = deployment.draft
        drafted = weight_bytes(draft.model, draft.weight_dtype, draft.expert_padding, draft.expert_slices)
        return math.ceil(drafted / draft.tp), kv_bytes_per_token_per_gpu(draft)
    spec = deployment.model
    embeddings = (1 if spec.tie_word_embeddings else 2) * 2.0 * spec.vocab_size * spec.hidden_size
    layer = (weight_bytes(spec, deployment.weight_dtype) - embeddings - 2.0 * spec.hidden_size) / spec.num_hidden_layers
    return math.ceil(layer / deployment.tp), kv_bytes_per_token_per_gpu(deployment, layers=1)


def stage_weight_bytes(deployment: Deployment) -> list[int]:
    """Weight bytes on one GPU of each pipeline stage: its layers' share, plus the input embedding on the
    first stage and the final norm and LM head on the last (the LM head is a second copy when tied). With
    expert parallelism a GPU holds whole routed experts, as many as the busiest GPU of the group; an MoE model's
    DP engines without it a TP x DP slice of every routed expert. Routed experts as vLLM allocates them: MXFP4
    ones padded to its MoE kernel's tiles (Deployment.expert_padding)."""
    spec, pp, tp = deployment.model, deployment.pp, deployment.tp
    total = weight_bytes(spec, deployment.weight_dtype, deployment.expert_padding, deployment.expert_slices)
    if pp == 1 and deployment.ep_size == 1 and not deployment.experts_sliced_over_dp:
        return [math.ceil(total / tp)]
    table = 2.0 * spec.vocab_size * spec.hidden_size  # one 16-bit vocab x hidden table
    if pp == 1:
        return [math.ceil(_stage_layer_bytes(deployment)[0] / tp + embedding_params(spec) * 2.0 / tp)]
    if spec.num_dense_mlp_layers or deployment.ep_size > 1 or deployment.experts_sliced_over_dp:  # not per layer alike
        stages = _stage_layer_bytes(deployment)
    else:
        outside = (1 if spec.tie_word_embeddings else 2) * table + 2.0 * spec.hidden_size
        per_layer = (total - outside) / spec.num_hidden_layers
        stages = [per_layer * layers for layers in deployment.stage_layers]
    stages[0] += table
    stages[-1] += table + 2.0 * spec.hidden_size
    return [math.ceil(bytes_ / tp) for bytes_ in stages]


def lora_bytes(deployment: Deployment, slots: int) -> list[int]:
    """Bytes on one GPU of each pipeline stage that LoRA's adapter slots take: vLLM allocates, when the model loads
    (before the KV cache is sized from what is left), a stacked A and B buffer of max_lora_rank for each of the
    max_loras slots on every linear it wraps (lora/layers: create_lora_weights, lora_a_stacked (max_loras, 1,
    max_lora_rank, in) and lora_b_stacked (max_loras, 1, out, max_lora_rank), in the model's dtype); a stage has
    its layers' share."""
    if not slots or not deployment.lora_rank:
        return [0] * deployment.pp
    per_layer = slots * deployment.lora_adapter_bytes(deployment.lora_rank) / deployment.model.num_hidden_layers
    return [math.ceil(per_layer * layers) for layers in deployment.stage_layers]


def _stage_layer_bytes(deployment: Deployment) -> list[float]:
    """Each stage's layer bytes, its dense layers (leading ones fall on the first stages, interleaved ones
    spread) at the dense layer's bytes; x tp."""
    spec, padding, slices = deployment.model, deployment.expert_padding, deployment.expert_slices
    dense, moe = layer_weight_bytes(spec, deployment.weight_dtype, padding, slices)
    expert = padded_expert_params(spec, padding, slices) * weight_bytes_per_param(deployment.weight_dtype)
    if deployment.ep_size > 1:  # counted x tp here, as the caller divides by tp: whole experts per GPU
        local = local_experts(spec.num_local_experts, deployment.ep_size)
        moe += (local * deployment.tp - spec.num_local_experts) * expert
    elif deployment.experts_sliced_over_dp:  # every expert's slice over TP x DP GPUs, not TP
        moe -= spec.num_local_experts * expert * (1.0 - 1.0 / deployment.dp)
    stages, start = [], 0
    for layers in deployment.stage_layers:
        num_dense = layers - spec.num_moe_layers_in(start, layers)
        stages.append(num_dense * dense + (layers - num_dense) * moe)
        start += layers
    return stages


def activation_peak_bytes(deployment: Deployment, settings: MemorySettings) -> int:
    """Largest live activations of a forward pass over max_num_batched_tokens, plus the sampler's logits."""
    spec, tp = deployment.model, deployment.tp
    inter, heads = spec.widest_mlp // tp, spec.num_attention_heads // tp
    kv_heads = max(1, spec.num_key_value_heads // tp)
    per_token = 2 * (3 * inter + 4 * spec.hidden_size + (heads + 2 * kv_heads) * spec.head_dim)
    logits = settings.max_num_seqs * spec.vocab_size * SAMPLER_LOGIT_BYTES
    return settings.max_num_batched_tokens * per_token + logits


def nccl_reserve_bytes(hardware: HardwareProfile, tp: int) -> int:
    """NCCL buffers per GPU at this TP size, from the profile's table: its entry, else the next larger TP
    listed, else the largest listed (buffers stop growing with the group)."""
    table = hardware.nccl_reserve_bytes_by_tp
    at_or_above = [size for size in sorted(table) if size >= tp]
    return table[at_or_above[0] if at_or_above else max(table)]


def _gb(value: float) -> str:
    return f"{value / GB:.1f} GB"


def plan_memory(deployment: Deployment, settings: MemorySettings) -> MemoryPlan:
    """The memory plan, or DoesNotFitError naming the numbers when the replica cannot start."""
    hw, spec, tp = deployment.hardware, deployment.model, deployment.tp
    requested = math.ceil(hw.memory_bytes * settings.gpu_memory_utilization)
    lora = lora_bytes(deployment, settings.lora_slots)
    per_stage = [stage + lora_share for stage, lora_share in zip(stage_weight_bytes(deployment), lora, strict=True)]
    weights = max(per_stage)
    if weights >= requested:
        utilization = f"at gpu_memory_utilization {settings.gpu_memory_utilization}"
        what = f"{spec.name} in {deployment.weight_dtype}"
        if settings.lora_slots:
            what += f" with {settings.lora_slots} LoRA slots of rank {deployment.lora_rank} ({_gb(sum(lora) * tp)})"
        if deployment.pp == 1:
            raise DoesNotFitError(
                f"{what} needs {_gb(weights * tp)} of weights; TP={tp} on "
                f"{hw.name} offers {_gb(requested * tp)} {utilization}"
            )
        raise DoesNotFitError(
            f"{what} needs {_gb(weights)} of weights per GPU on its heaviest "
            f"stage; TP={tp} x PP={deployment.pp} on {hw.name} offers {_gb(requested)} per GPU {utilization}"
        )
    activation = activation_peak_bytes(deployment, settings)
    non_torch = CUDA_CONTEXT_BYTES + nccl_reserve_bytes(hw, tp)
    graphs = 0 if settings.no_cuda_graphs or hw.kind == "cpu" else CUDAGRAPH_BYTES
    draft_weights, draft_kv = proposer_bytes(deployment)  # on the last stage with pipeline parallelism
    last = len(per_stage) - 1
    per_stage = [stage + (draft_weights if i == last else 0) for i, stage in enumerate(per_stage)]
    groups = KvCacheGroups.of(spec, settings.hybrid_kv_cache)
    budget = requested  # what the KV cache and everything else share
    if settings.measured_kv_sizing:  # vLLM 0.34 measure_kv_cache_bytes: the device less a margin caps the budget
        floor = EXTENSIBLE_MARGIN_FLOOR_BYTES["cuda" if hw.cuda_compute_capability is not None else "rocm"]
        budget = min(requested, hw.memory_bytes - max(floor, int(0.75 * activation)))
    stages = [
        (
            budget - stage - activation - non_torch - graphs,
            stage_kv_bytes_per_token(deployment, layers, groups) + (draft_kv if i == last else 0),
        )
        for i, (stage, layers) in enumerate(zip(per_stage, deployment.stage_layers, strict=True))
    ]
    blocks = [max(0, room) // (settings.block_size * per_token) for room, per_token in stages]
    tightest = min(range(len(blocks)), key=lambda i: (blocks[i], -per_stage[i]))  # a tie: the heaviest stage
    kv_cache, per_token = stages[tightest]
    weights = per_stage[tightest]
    num_blocks = blocks[tightest]
    if num_blocks == 0:
        raise DoesNotFitError(
            f"{spec.name} on TP={tp} x {hw.name} leaves no KV cache: {_gb(requested)} requested per GPU, "
            f"weights {_gb(weights)}, activations {_gb(activation)} at max_num_batched_tokens "
            f"{settings.max_num_batched_tokens}, reserves {_gb(non_torch + graphs)}"
        )
    plan = MemoryPlan(
        requested, weights, activation, non_torch, graphs, kv_cache, per_token, settings.block_size, num_blocks
    )
    needed = one_sequence_bytes(deployment, settings, groups, per_token)
    if needed > kv_cache or (plan.kv_capacity_tokens < settings.max_model_len and not groups.windowed_groups):
        raise DoesNotFitError(
            f"max_model_len {settings.max_model_len} needs {_gb(needed)} of KV cache "
            f"per GPU for one sequence, but {spec.name} on TP={tp} x {hw.name} has {_gb(kv_cache)} "
            f"({plan.kv_capacity_tokens} tokens); lower max_model_len or raise tensor parallelism"
        )
    return plan


def one_sequence_bytes(deployment: Deployment, settings: MemorySettings, groups: KvCacheGroups, per_token: int) -> int:
    """KV bytes one max_model_len sequence needs on one GPU at start-up. Without a windowed group: max_model_len
    tokens at per_token bytes. With one, vLLM 0.15.1's check (v1/core/kv_cache_utils.py get_kv_cache_configs ->
    _max_memory_usage_bytes_from_groups): group size x page x the blocks the first group's spec needs for one
    sequence (max_memory_usage_bytes). The first group is the first layer's kind, a sliding-window one in every
    hybrid family we know (Gemma 2/3, gpt-oss, Cohere2) and in a model windowed throughout, so the blocks are
    kv_cache_interface.py SlidingWindowSpec's: cdiv(min(window - 1 + max_num_batched_tokens, max_model_len),
    block_size) + 1 (the window need not start at a block's start); with pipeline parallelism vLLM checks these
    global groups against the smallest worker's memory."""
    length = settings.max_model_len
    if not groups.windowed_groups:
        return length * per_token
    size = settings.block_size
    per_layer_token = kv_bytes_per_token_per_gpu(deployment) // deployment.model.num_hidden_layers
    blocks = -(-min(groups.window - 1 + settings.max_num_batched_tokens, length) // size) + 1
    return groups.group_size * per_layer_token * size * blocks
