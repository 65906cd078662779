"""One replica's deployment: the model on its GPUs (tensor and pipeline parallel sizes, weight and KV formats,
CUDA-graph and scheduling options, speculative decoding, LoRA, expert parallelism, the vLLM release that loads it),
and vLLM's split of the layers over pipeline stages. The iteration-time model (perf/iteration.py) and the memory
plan (perf/memory.py) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.config.dtypes import EXPERTS_ONLY, NO_PADDING, ExpertPadding, KvDtype, WeightDtype, mxfp4_expert_padding
from ttftsim.config.graphs import CudagraphMode, capture_sizes
from ttftsim.config.hardware import HardwareProfile, Link
from ttftsim.config.versions import DEFAULT_VERSION
from ttftsim.errors import ArgumentError
from ttftsim.model.spec import ModelSpec

DEFAULT_CAPTURE_SIZES = capture_sizes(512)  # vLLM's grid up to its default cap


@dataclass(frozen=True)
class Deployment:
    """One replica's model on its GPUs. Invariant: tp divides the attention heads."""

    model: ModelSpec
    hardware: HardwareProfile
    tp: int = 1
    weight_dtype: WeightDtype = "bf16"
    kv_dtype: KvDtype = "bf16"
    cudagraph_sizes: tuple[int, ...] = DEFAULT_CAPTURE_SIZES  # batch sizes with captured graphs (): eager only
    cudagraph_mode: CudagraphMode = "FULL_AND_PIECEWISE"  # vLLM's, as config/graphs.py resolves it
    iteration_overhead_s: float | None = None  # engine-version override of the hardware's host overhead
    decode_graph_iteration_s: float | None = None
    max_num_seqs: int | None = None  # FULL decode graphs are captured up to this size (None: every size)
    async_scheduling: bool = False  # host time overlaps device time (vLLM --async-scheduling)
    pp: int = 1  # pipeline stages, each of tp GPUs
    spec_method: str = ""  # speculative decoding's proposer ("" = none): ngram, eagle, eagle3, mtp, draft_model
    spec_tokens: int = 0  # draft tokens per sequence and step (k)
    draft: Deployment | None = None  # the draft model of draft_model, on the same GPUs
    lora_rank: int = 0  # max_lora_rank when LoRA adapters are served (the kernels run at it), else 0
    expert_parallel: bool = False  # vLLM --enable-expert-parallel: whole experts per GPU over the TP x DP ranks
    dp: int = 1  # data-parallel ranks, each with its own batch, sharing the experts (engine/data_parallel.py)
    expert_load_imbalance: float | None = None  # the busiest EP GPU's routed load over the mean (None: random)
    vllm_version: str = DEFAULT_VERSION  # the release that loads the weights (how it pads MXFP4 experts)

    def __post_init__(self) -> None:
        if self.model.num_attention_heads % self.tp:
            raise ArgumentError(
                "tensor_parallel_size",
                f"tensor parallel size {self.tp} does not divide {self.model.name}'s "
                f"{self.model.num_attention_heads} attention heads",
            )
        if self.pp > self.model.num_hidden_layers:
            raise ArgumentError(
                "pipeline_parallel_size",
                f"pipeline parallel size {self.pp} exceeds {self.model.name}'s {self.model.num_hidden_layers} layers",
            )
        if self.expert_parallel and not self.model.is_moe:
            raise ArgumentError(
                "enable_expert_parallel", f"enable_expert_parallel needs an MoE model; {self.model.name} has no experts"
            )
        if self.expert_load_imbalance is not None and not self.expert_parallel:
            raise ValueError("expert_load_imbalance without enable_expert_parallel (it is the load of an EP GPU)")

    @property
    def experts_sliced_over_dp(self) -> bool:
        """An MoE model's data-parallel engines without expert parallelism slice every routed expert over all TP x
        DP GPUs and run every rank's tokens through them (vLLM FusedMoEParallelConfig.make: the MoE layer's TP is
        flattened across DP)."""
        return self.model.is_moe and self.dp > 1 and not self.expert_parallel

    @property
    def ep_size(self) -> int:
        """GPUs the routed experts are split over: TP x DP with expert parallelism, else 1 (TP slices)."""
        return self.tp * self.dp if self.expert_parallel else 1

    @property
    def expert_slices(self) -> int:
        """GPUs one routed expert's intermediate dimension is split over: none with expert parallelism (whole
        experts), TP x DP when DP engines slice every expert, else TP."""
        if self.ep_size > 1:
            return 1
        return self.tp * self.dp if self.experts_sliced_over_dp else self.tp

    @property
    def expert_padding(self) -> ExpertPadding:
        """How vLLM pads the routed experts when it allocates them on these GPUs: MXFP4 ones to its MoE backend's
        tiles (config/dtypes.py mxfp4_expert_padding); other formats keep the checkpoint's shape."""
        if self.weight_dtype not in EXPERTS_ONLY or not self.model.is_moe:
            return NO_PADDING
        return mxfp4_expert_padding(self.hardware.cuda_compute_capability, self.vllm_version)

    def lora_targets(self) -> tuple[tuple[int, int, int], ...]:
        """(in, out, slices) of the linears vLLM attaches LoRA to, per layer and TP rank: the fused QKV (three
        slices: an adapter has an A for each of q, k and v), the output projection, the fused gate-up (two) and the
        down projection. A column-parallel linear's A is whole on every rank and its B sliced, a row-parallel
        one's the other way round (vllm/lora/layers)."""
        m, tp = self.model, self.tp
        q, kv = m.num_attention_heads * m.head_dim, m.num_key_value_heads * m.head_dim
        inter, h = m.intermediate_size, m.hidden_size
        return ((h, (q + 2 * kv) // tp, 3), (q // tp, h, 1), (h, 2 * inter // tp, 2), (inter // tp, h, 1))

    def lora_adapter_bytes(self, rank: int) -> float:
        """One adapter's bf16 weights on one GPU: an A (rank x in) per slice and B (out x rank) for every target,
        every layer."""
        return 2.0 * rank * self.model.num_hidden_layers * sum(n * i + o for i, o, n in self.lora_targets())

    @property
    def stage_layers(self) -> tuple[int, ...]:
        """Layers per pipeline stage (vLLM get_pp_indices without VLLM_PP_LAYER_PARTITION)."""
        return pipeline_partition(self.model.num_hidden_layers, self.pp)

    def stage_link(self, boundary: int) -> Link:
        """The link between stage `boundary` and the next: the network where the two sit on different nodes
        (stages fill nodes in order, gpus_per_node // tp of them per node), NVLink/PCIe otherwise."""
        per_node = max(1, self.hardware.gpus_per_node // self.tp)
        if self.tp > self.hardware.gpus_per_node or (boundary + 1) % per_node == 0:
            return self.hardware.inter_node_link
        return self.hardware.intra_node_link

    @property
    def tp_link(self) -> Link:
        """The slowest hop of the TP group: inter-node once the group spans nodes."""
        if self.tp > self.hardware.gpus_per_node:
            return self.hardware.inter_node_link
        return self.hardware.intra_node_link


def pipeline_partition(num_layers: int, pp: int) -> tuple[int, ...]:
    """vLLM's split of num_layers over pp stages: equal shares, and each remaining layer to one stage before
    the last, from the second-to-last backwards (get_pp_indices, vllm/distributed/utils.py)."""
    partitions = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        partitions[-i] += 1
    return tuple(partitions)
