"""Iteration-time model: the time of one engine step on one replica, and its breakdown by operator.

Per transformer layer on each TP rank: QKV and output projections, the MLP (dense, or MoE with the experts the
batch actually hits, as one fused kernel; shared experts, leading dense layers and expert parallelism:
perf/ffn.py), prefill attention (FlashAttention: no n x n matrix, cost in query-key pairs), decode attention
(reads the KV cache; multi-head latent attention: perf/mla.py), fused norm/residual/RoPE/activation kernels,
and two TP all-reduces. Sliding-window layers attend within their window (perf/attention.py). Once per step:
the LM head for the sampled sequences only, and the host time (scheduling, input preparation, launches,
sampling bookkeeping).

CUDA graphs (cudagraph.py): a batch within the capture limit runs its captured kernels at the padded token
count, and its host time is that of a FULL graph (uniform decode), of PIECEWISE graphs (attention launched
eagerly in every layer), or eager. With async scheduling (vLLM v1/engine/core.py
EngineCore.step_with_batch_queue: step k+1 is scheduled and its inputs prepared while step k runs on the
device) the host time overlaps the device time: a step takes max(device, host) instead of their sum.

Pipeline parallelism (`pp` stages of `tp` GPUs each): the layers are split as vLLM's get_pp_indices splits
them (vllm/distributed/utils.py; here perf/deployment.py: equal shares, the remainder one layer each to the
stages before the last, counting back from the second-to-last); `stage_times` gives the seconds a batch
occupies each stage (its layers' share of the device time; the first stage also the host time, the last the
final norm and LM head) and `transfer_times` the send of the hidden states and residual between stages (vLLM's
IntermediateTensors, each TP rank sending its 1/tp slice before an all-gather: 2 x tokens x hidden x 2 bytes /
tp per rank) over NVLink inside a node or the network between nodes. The engine runs PP batches through them
(engine/pipeline.py).

Everything that depends only on (tokens, sampled) is memoised: decode steps differ only in attention.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from ttftsim.config.dtypes import dense_weight_dtype, gemm_compute_dtype, kv_bytes_per_element, weight_bytes_per_param
from ttftsim.perf.attention import LayerKinds, windowed_sums
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.cudagraph import GraphDispatch, GraphMode
from ttftsim.perf.deployment import Deployment as Deployment
from ttftsim.perf.deployment import pipeline_partition as pipeline_partition
from ttftsim.perf.ffn import FfnCosts
from ttftsim.perf.kernels import AttentionShape, KernelCosts, RooflineCosts
from ttftsim.perf.mla import MlaCosts, MlaLayer

ACTIVATION_BYTES = 2  # bf16 activations
# PIECEWISE graphs replay the pieces between attention ops and launch attention eagerly: per decoder layer
# one graph launch plus the attention op's two kernels (KV-cache write, FlashAttention) against twelve launches
# when nothing is captured (norm, QKV, RoPE, cache write, attention, O, all-reduce, add+norm, gate-up, SiLU-mul,
# down, all-reduce). So a piecewise step's host time sits 3/12 of the way from the FULL-graph figure to the
# eager one. A count of launches, not a measurement.
PIECEWISE_HOST_SHARE = 3.0 / 12.0


@dataclass(frozen=True)
class StepTiming:
    """One iteration's time and where it goes (seconds per operator class, summed over layers).
    Invariant: the breakdown sums to total_s; its `overhead` entry is the host time not hidden under the
    device (host_s - hidden_host_s)."""

    total_s: float
    breakdown: Mapping[str, float] = field(default_factory=dict)
    host_s: float = 0.0
    hidden_host_s: float = 0.0
    graph_mode: GraphMode = "eager"
    num_padded_tokens: int = 0


class IterationModel:
    """Iteration time for a deployment under a KernelCosts (roofline by default, calibrated when given)."""

    def __init__(self, deployment: Deployment, costs: KernelCosts | None = None) -> None:
        self.deployment = deployment
        self.costs: KernelCosts = costs if costs is not None else RooflineCosts(deployment.hardware)
        m, tp = deployment.model, deployment.tp
        self._layers = m.num_hidden_layers
        self._kinds = LayerKinds.of(m)
        self._wbytes = weight_bytes_per_param(dense_weight_dtype(deployment.weight_dtype))  # all but routed experts
        self._dtype = gemm_compute_dtype(deployment.weight_dtype)
        self._init_attention(deployment)
        self._inter = m.intermediate_size // tp
        expert_bytes = weight_bytes_per_param(deployment.weight_dtype)
        self._ffn = FfnCosts(m, tp, self.costs, self._dtype, self._wbytes, expert_bytes, deployment.expert_padding)
        if deployment.ep_size > 1:
            self._ffn.expert_parallel(
                deployment.ep_size, deployment.dp, deployment.hardware, deployment.expert_load_imbalance
            )
        elif deployment.experts_sliced_over_dp:
            self._ffn.sliced_over_dp(deployment.dp, deployment.hardware)
        self._body_cache: dict[int, dict[str, float]] = {}  # by token count: the dense parts but the LM head
        self._body_total: dict[int, float] = {}  # their sum
        self._head_cache: dict[int, float] = {}  # by sampled rows: the LM head
        self._decode_fixed: dict[int, tuple[float, float]] = {}  # a decode batch size's dense and host seconds
        overhead = deployment.hardware.overhead
        eager = deployment.iteration_overhead_s
        graph = deployment.decode_graph_iteration_s
        eager_s = overhead.iteration_s if eager is None else eager
        graph_s = overhead.decode_graph_iteration_s if graph is None else graph
        self._host_s: dict[GraphMode, float] = {
            "full": graph_s,
            "piecewise": graph_s + PIECEWISE_HOST_SHARE * (eager_s - graph_s),
            "eager": eager_s,
        }
        gpu = deployment.hardware.kind == "gpu"  # no graphs on a CPU
        sizes, mode = (deployment.cudagraph_sizes, deployment.cudagraph_mode) if gpu else ((), "NONE")
        self.graphs = GraphDispatch.of_sizes(sizes, mode, deployment.max_num_seqs)
        self._async = deployment.async_scheduling
        self._spec = deployment.spec_tokens > 0
        self._extras = self._spec or deployment.lora_rank > 0
        draft = deployment.draft
        self._drafter = None if draft is None else IterationModel(draft, costs)

    @property
    def attention_window(self) -> int:
        """The sliding window the scheduler counts each step's windowed attention for (0: no windowed layer)."""
        return self._kinds.window if self._kinds.windowed else 0

    def _init_attention(self, deployment: Deployment) -> None:
        """Attention shapes: one for both phases, or MLA's two (prefill over the up-projected latent, decode
        over the cached one), timed on the roofline (no MLA kernel is calibrated: perf/mla.py)."""
        m, tp, kv_bytes = deployment.model, deployment.tp, kv_bytes_per_element(deployment.kv_dtype)
        self._mla: MlaCosts | None = None
        self._attn_costs: KernelCosts = self.costs
        if m.is_mla:
            layer = MlaLayer.of(m, tp)
            self._mla = MlaCosts(layer, self.costs, self._dtype, self._wbytes)
            self._attn_costs = RooflineCosts(deployment.hardware)
            self._attn, self._decode_attn = layer.prefill_shape(), layer.decode_shape(kv_bytes)
            self._rope_cache_bytes = layer.rope_and_cache_bytes(kv_bytes)
            return
        a = AttentionShape(m.num_attention_heads // tp, max(1, m.num_key_value_heads // tp), m.head_dim, kv_bytes)
        self._attn = self._decode_attn = a
        rope = 4.0 * (a.q_heads + a.kv_heads) * a.head_dim
        self._rope_cache_bytes = rope + 2.0 * a.kv_heads * a.head_dim * a.kv_bytes

    # ---- parts that depend only on the token and sampled counts ----

    def _gemm(self, m: int, n: int, k: int) -> float:
        return self.costs.gemm_s(m, n, k, self._dtype, n * k * self._wbytes)

    def _elementwise_s(self, tokens: int) -> float:
        h = self.deployment.model.hidden_size
        norm = 8.0 * tokens * h  # fused residual add + RMSNorm: read 2, write 2 vectors of h in bf16
        rope_and_cache = tokens * self._rope_cache_bytes
        act = 6.0 * tokens * self._inter  # SiLU(gate) * up: read 2, write 1
        return 2 * self.costs.memory_s(norm) + self.costs.memory_s(rope_and_cache) + self.costs.memory_s(act)

    def _body_parts(self, tokens: int) -> dict[str, float]:
        """The dense kernels of all layers for `tokens` (every part but the LM head), memoised per token count;
        their sum too, added in order (a plain left fold: the same on every Python version)."""
        cached = self._body_cache.get(tokens)
        if cached is not None:
            return cached
        spec, n_layers = self.deployment.model, self._layers
        h = spec.hidden_size
        message = float(tokens * h * ACTIVATION_BYTES)
        parts = self._projection_parts(tokens)
        parts.update(self._ffn.parts(tokens))
        parts |= {
            "norms_elementwise": n_layers * self._elementwise_s(tokens) + self.costs.memory_s(6.0 * tokens * h),
            "allreduce": 2 * n_layers * self.costs.allreduce_s(message, self.deployment.tp, self.deployment.tp_link),
        }
        total = 0.0
        for value in parts.values():
            total += value
        self._body_cache[tokens] = parts
        self._body_total[tokens] = total
        return parts

    def _lm_head_s(self, sampled: int) -> float:
        """The LM head over the sampled rows and their fp32 logits' gather and sampling, memoised per count."""
        head = self._head_cache.get(sampled)
        if head is None:
            spec = self.deployment.model
            h, vocab_shard = spec.hidden_size, spec.vocab_size // self.deployment.tp
            head = self._head_cache[sampled] = (
                self.costs.gemm_s(sampled, vocab_shard, h, "bf16", vocab_shard * h * 2.0)
                + self.costs.memory_s(8.0 * sampled * spec.vocab_size)  # fp32 logits: gather + sample
                if sampled
                else 0.0
            )
        return head

    def _dense_parts(self, tokens: int, sampled: int) -> dict[str, float]:
        """The dense kernels of a step by operator class, the LM head last."""
        return {**self._body_parts(tokens), "lm_head": self._lm_head_s(sampled)}

    def _projection_parts(self, tokens: int) -> dict[str, float]:
        """QKV (MLA: the latent and query projections) and output projections of all layers."""
        n_layers, h = self._layers, self.deployment.model.hidden_size
        if self._mla is not None:
            return {
                "qkv_proj": n_layers * self._mla.projections_s(tokens),
                "o_proj": n_layers * self._mla.o_proj_s(tokens),
            }
        a = self._attn
        return {
            "qkv_proj": n_layers * self._gemm(tokens, (a.q_heads + 2 * a.kv_heads) * a.head_dim, h),
            "o_proj": n_layers * self._gemm(tokens, h, a.q_heads * a.head_dim),
        }

    def _dense_s(self, tokens: int, sampled: int) -> float:
        """The dense kernels' seconds: the layers' (memoised per token count) then the LM head's (per sampled
        count), so that a prefill step's new mix of the two reuses both (a memo per pair missed on most of a
        cluster's prefill steps)."""
        body = self._body_total.get(tokens)
        if body is None:
            self._body_parts(tokens)
            body = self._body_total[tokens]
        return body + self._lm_head_s(sampled)

    # ---- public ----

    def graph_mode(self, shape: BatchShape) -> GraphMode:
        """FULL for a uniform decode batch (every sequence one new token), PIECEWISE for any other batch
        within the capture limit, eager above it (cudagraph.py)."""
        return self.graphs.mode(shape.num_tokens, shape.prefill_tokens == shape.num_prefill_seqs)

    def overhead_s(self, shape: BatchShape) -> float:
        """Host time of the step (scheduling, input preparation, launches), hidden or not."""
        return self._host_s[self.graph_mode(shape)]

    def _attention_parts(self, shape: BatchShape) -> tuple[float, float]:
        """Prefill and decode attention of all layers (MLA: with the prefill's up-projection of the latent
        and the decode's absorbed projections)."""
        prefill = self._attn_costs.prefill_attention_s(
            shape.prefill_tokens, shape.prefill_attn_pairs, shape.prefill_kv_tokens, self._attn
        )
        decode = self._attn_costs.decode_attention_s(shape.num_decode_seqs, shape.decode_kv_tokens, self._decode_attn)
        if self._mla is not None:
            prefill += self._mla.up_projection_s(shape.prefill_kv_tokens)
            decode += self._mla.absorbed_s(shape.num_decode_seqs)
        kinds = self._kinds
        if not kinds.windowed:
            return self._layers * prefill, self._layers * decode
        pairs, prefill_kv, decode_kv = windowed_sums(shape, kinds.window)
        local = self._attn_costs.prefill_attention_s(shape.prefill_tokens, pairs, prefill_kv, self._attn)
        local_decode = self._attn_costs.decode_attention_s(shape.num_decode_seqs, decode_kv, self._decode_attn)
        return kinds.full * prefill + kinds.windowed * local, kinds.full * decode + kinds.windowed * local_decode

    def _step_s(self, device_s: float, host_s: float) -> float:
        """Host time after the device time (synchronous), or overlapped with it (async scheduling)."""
        return max(device_s, host_s) if self._async else device_s + host_s

    def _device_s(self, shape: BatchShape) -> float:
        """The step's kernels: the captured ones at the padded token count, attention at the real one; the
        drafts of speculative decoding after them."""
        prefill, decode = self._attention_parts(shape)
        rows = shape.num_sampled + shape.num_spec_tokens
        tokens = shape.num_tokens if shape.num_tokens >= shape.dp_tokens else shape.dp_tokens
        uniform = shape.prefill_tokens == shape.num_prefill_seqs
        device = self._dense_s(self.graphs.padded_tokens(tokens, uniform), rows) + prefill + decode
        if self._extras:  # speculative decoding's drafts, LoRA kernels
            if shape.num_loras and self.deployment.lora_rank:
                device += self.lora_s(shape.num_tokens, shape.num_loras)
            if self._spec:
                device += self.proposer_s(shape)
        return device

    def lora_s(self, tokens: int, adapters: int) -> float:
        """The punica/SGMV LoRA kernels of one step: per target linear a shrink (tokens x slices x rank x in: one
        launch over its slices) and an expand (tokens x out x rank) GEMM, reading every active adapter's A and B at
        max_lora_rank, in every layer (vllm/lora/punica_wrapper add_shrink, add_expand)."""
        rank, layers, total = self.deployment.lora_rank, self._layers, 0.0
        for inputs, outputs, slices in self.deployment.lora_targets():
            total += self.costs.gemm_s(tokens, slices * rank, inputs, "bf16", 2.0 * adapters * slices * rank * inputs)
            total += self.costs.gemm_s(tokens, outputs, rank, "bf16", 2.0 * adapters * outputs * rank)
        return layers * total

    def proposer_s(self, shape: BatchShape) -> float:
        """Device time of drafting k tokens for each sequence that sampled (docs/engine-semantics.md 11):
        EAGLE, EAGLE-3 and MTP run k passes of one decoder layer of the target's width and its LM head over
        those sequences (attention: one layer's share of this step's); a draft model runs k decode steps of
        its own; n-gram lookup runs on the CPU (not charged)."""
        seqs = shape.num_sampled
        if not seqs or self.deployment.spec_method == "ngram":
            return 0.0
        k = self.deployment.spec_tokens
        if self._drafter is not None:
            context = shape.decode_kv_tokens + shape.prefill_kv_tokens
            draft_shape = BatchShape(num_decode_seqs=seqs, decode_kv_tokens=max(context, seqs), num_sampled=seqs)
            return k * self._drafter._device_s(draft_shape)
        parts = self._dense_parts(self.graphs.padded_tokens(seqs), seqs)
        layer = (sum(parts.values()) - parts["lm_head"]) / self._layers
        prefill, decode = self._attention_parts(shape)
        return k * (layer + parts["lm_head"] + (prefill + decode) / self._layers)

    def time_s(self, shape: BatchShape) -> float:
        """Iteration time in seconds (the fast path the engine calls every step)."""
        if shape.num_tokens == 0:
            return 0.0
        return self._step_s(self._device_s(shape), self.overhead_s(shape))

    def idle_start_s(self, shape: BatchShape) -> float:
        """An iteration started from idle: its host time (scheduling, input preparation) runs before the
        device starts, with no earlier step to hide under, even with async scheduling."""
        if shape.num_tokens == 0:
            return 0.0
        return self._device_s(shape) + self.overhead_s(shape)

    def timing(self, shape: BatchShape) -> StepTiming:
        """Iteration time with its breakdown by operator class; `overhead` is the host time left exposed."""
        if shape.num_tokens == 0:
            return StepTiming(0.0, {})
        uniform = shape.prefill_tokens == shape.num_prefill_seqs
        padded = self.graphs.padded_tokens(max(shape.num_tokens, shape.dp_tokens), uniform)
        breakdown = self._dense_parts(padded, shape.num_sampled + shape.num_spec_tokens)
        breakdown["prefill_attention"], breakdown["decode_attention"] = self._attention_parts(shape)
        if self._spec:
            breakdown["proposer"] = self.proposer_s(shape)
        if shape.num_loras and self.deployment.lora_rank:
            breakdown["lora"] = self.lora_s(shape.num_tokens, shape.num_loras)
        device_s = sum(breakdown.values())
        host_s = self.overhead_s(shape)
        total_s = self._step_s(device_s, host_s)
        breakdown["overhead"] = total_s - device_s if self._async else host_s
        return StepTiming(total_s, breakdown, host_s, host_s - breakdown["overhead"], self.graph_mode(shape), padded)

    def stage_times(self, shape: BatchShape, hidden_host: bool) -> list[float]:
        """Seconds the batch occupies each pipeline stage: its layers' share of the device time; the first
        stage adds the host time (overlapped with the device when a batch was in flight as it was scheduled:
        vLLM's engine core schedules the next batch while the queue is not full), the last stage the final norm
        and the LM head. One stage: the step time."""
        if shape.num_tokens == 0:
            return [0.0] * self.deployment.pp
        padded = self.graphs.padded_tokens(shape.num_tokens, shape.prefill_tokens == shape.num_prefill_seqs)
        head = self._lm_head_s(shape.num_sampled + shape.num_spec_tokens) + self.costs.memory_s(
            6.0 * padded * self.deployment.model.hidden_size
        )
        layered = self._device_s(shape) - head
        shares = [layered * layers / self._layers for layers in self.deployment.stage_layers]
        shares[-1] += head
        host = self.overhead_s(shape)
        shares[0] = max(shares[0], host) if hidden_host else shares[0] + host
        return shares

    def transfer_times(self, shape: BatchShape) -> list[float]:
        """Seconds to send the batch's hidden states and residual across each stage boundary (pp - 1 of them)."""
        deployment = self.deployment
        per_rank = 2.0 * shape.num_tokens * deployment.model.hidden_size * ACTIVATION_BYTES / deployment.tp
        return [
            link.latency_s + per_rank / link.bw_bytes_per_s
            for link in (deployment.stage_link(boundary) for boundary in range(deployment.pp - 1))
        ]

    def decode_step_s(self, num_seqs: int) -> Callable[[int], float]:
        """The time of a decode-only iteration of num_seqs sequences as a function of their KV total (sum,
        including this step's token): for runs short enough that numpy's call overhead would dominate.
        Equal, bit for bit, to time_s on the same shape."""
        dense, host = self._decode_fixed_s(num_seqs)
        layers, attention, shape = self._layers, self._attn_costs.decode_attention_s, self._decode_attn
        kinds = self._kinds
        if kinds.windowed:  # each sequence reads at most the window in a windowed layer (perf/attention.py)
            full, windowed, cap, overlap = kinds.full, kinds.windowed, num_seqs * kinds.window, self._async

            def step(kv_tokens: int) -> float:
                local = windowed * attention(num_seqs, min(kv_tokens, cap), shape)
                device = dense + (full * attention(num_seqs, kv_tokens, shape) + local)  # time_s's order
                return max(device, host) if overlap else device + host

            return step
        if self._async:
            return lambda kv_tokens: max(dense + layers * attention(num_seqs, kv_tokens, shape), host)
        return lambda kv_tokens: dense + layers * attention(num_seqs, kv_tokens, shape) + host

    def _decode_fixed_s(self, num_seqs: int) -> tuple[float, float]:
        """What a decode-only iteration of num_seqs sequences spends whatever their context: its dense kernels (with
        MLA's absorbed projections) and its host time; memoised (every decode run reads them)."""
        fixed = self._decode_fixed.get(num_seqs)
        if fixed is None:
            dense = self._dense_s(self.graphs.padded_tokens(num_seqs), num_seqs)
            host = self.overhead_s(BatchShape(num_decode_seqs=num_seqs, decode_kv_tokens=num_seqs))
            if self._mla is not None:
                dense += self._layers * self._mla.absorbed_s(num_seqs)
            fixed = self._decode_fixed[num_seqs] = (dense, host)
        return fixed

    def decode_run_s(self, num_seqs: int, kv_tokens: int, steps: int) -> NDArray[np.float64]:
        """Times of `steps` consecutive decode-only iterations of an unchanged batch of num_seqs sequences
        whose KV context starts at kv_tokens (sum, including this step's token) and grows by num_seqs per
        step. Equal, step by step, to calling time_s on each iteration's shape."""
        dense, host = self._decode_fixed_s(num_seqs)
        # kv_tokens + num_seqs * i, exact (integers below 2**53), in one call
        stop, step = kv_tokens + num_seqs * steps, num_seqs
        contexts = np.arange(kv_tokens, stop, step, dtype=np.float64) if step else np.full(steps, float(kv_tokens))
        attention = self._attn_costs.decode_attention_many_s(num_seqs, contexts, self._decode_attn)
        kinds = self._kinds
        if kinds.windowed:
            local = np.minimum(contexts, float(num_seqs * kinds.window))
            windowed = self._attn_costs.decode_attention_many_s(num_seqs, local, self._decode_attn)
            device = dense + (kinds.full * attention + kinds.windowed * windowed)
        else:
            device = dense + self._layers * attention
        result: NDArray[np.float64] = np.maximum(device, host) if self._async else device + host
        return result
