"""Engine arguments resolved: the defaults each modelled vLLM version applies, for a model and hardware.

Unset arguments (None) take the version's default for the hardware (serving-semantics.md 3.1): batch
tiers by device memory (>= 70 GiB and not A100: 8192 tokens / 1024 seqs in recent versions; >= 160 GiB from
0.28: 16384 / 1024; otherwise 2048 / 256; CPU 2048 / 128), gpu_memory_utilization 0.9 (0.92 from 0.20; from 0.34
1.0 on GPUs, the KV cache sized from measured memory: perf/memory.py), block 16 (64 on NVIDIA GPUs from 0.34),
prefix caching and chunked prefill on, FCFS, preemption by recompute of the last running request.
engine_limits.py resolves and checks the context length, the batch budget and the block size; the other
arguments (MLA's block size, CUDA graphs, async scheduling) are resolved here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ttftsim.config.dtypes import KvDtype, WeightDtype
from ttftsim.config.engine import EngineArgs, KvMode, SpeculativeConfig
from ttftsim.config.engine_limits import engine_limits
from ttftsim.config.graphs import CudagraphMode, compile_and_mode, graph_sizes
from ttftsim.config.hardware import HardwareProfile
from ttftsim.config.kv_transfer import LMCacheConfig
from ttftsim.config.versions import ApiServerCosts, VersionDefaults, at_least, version_defaults
from ttftsim.errors import ArgumentError


@dataclass(frozen=True)
class WindowedGroups:
    """The KV-cache groups of a model with sliding-window layers (perf/kv_groups.py) whose blocks the engine
    frees as they leave the window (kvcache/windowed.py), and the pool's size in one group's blocks."""

    full: int  # full-attention groups
    windowed: int  # sliding-window groups
    window: int  # the sliding window, in tokens
    num_blocks: int  # vLLM's num_gpu_blocks: blocks of one group's page


@dataclass(frozen=True)
class ResolvedEngine:
    """Engine arguments with every default applied for a model, hardware and version."""

    tp: int
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    block_size: int
    gpu_memory_utilization: float
    measured_kv_sizing: bool  # vLLM >= 0.34's extensible KV cache (perf/memory.py)
    enable_prefix_caching: bool
    enable_chunked_prefill: bool
    long_prefill_token_threshold: int
    scheduling_policy: Literal["fcfs", "priority"]
    weight_dtype: WeightDtype
    kv_dtype: KvDtype
    enforce_eager: bool
    num_gpu_blocks_override: int | None
    kv_cache_mode: KvMode
    frontend_overhead_s: float
    reserve_full_prompt: bool
    reserve_for_inflight_prefills: bool
    api_server: ApiServerCosts
    async_scheduling: bool = False
    iteration_overhead_s: float | None = None
    decode_graph_iteration_s: float | None = None
    pp: int = 1  # pipeline stages; PP batches in flight (engine/pipeline.py)
    speculative: SpeculativeConfig | None = None  # drafts verified each step (engine.py _apply)
    seed: int = 0  # the run's seed: draws of accepted draft tokens
    kv_offloading_gib: float = 0.0  # host memory for offloaded KV (all TP ranks together)
    kv_offload_blocks: int = 0  # blocks the CPU tier holds (replica.py sizes it from kv_offloading_gib)
    kv_load_s_per_block: float = 0.0  # copying one block back to every GPU of the replica, seconds
    lora_slots: int = 0  # adapters one batch may use (max_loras when LoRA is on, else 0)
    max_lora_rank: int = 16
    max_cpu_loras: int = 0
    lora_h2d_s: float = 0.0  # an adapter from host memory into its GPU slot (replica.py, from its size)
    lora_read_s: float = 0.0  # an adapter read from disk into host memory
    lmcache: LMCacheConfig | None = None  # LMCache's tiers (kv_transfer_config LMCacheConnectorV1)
    lmcache_chunk_bytes: int = 0  # one LMCache chunk's KV on each GPU (replica.py, from the memory plan)
    lmcache_h2d_bytes_per_s: float = 0.0  # host <-> GPU copies of chunks, per GPU (replica.py)
    lmcache_num_layers: int = 1  # layers a layerwise load or store is split into (replica.py)
    windowed_kv: WindowedGroups | None = None  # sliding-window groups freed as they leave the window (replica.py)
    hybrid_kv_cache_manager: bool = True  # not disabled by --disable-hybrid-kv-cache-manager (replica.py decides)
    dp: int = 1  # data-parallel engines in the replica (engine/data_parallel.py)
    max_num_queued_reqs: int | None = None  # the API server's admission limits (engine/admission.py)
    max_num_queued_tokens: int | None = None
    compiled: bool = True  # torch.compile runs at start (cluster/coldstart.py)
    cudagraph_mode: CudagraphMode = "FULL_AND_PIECEWISE"  # as the engine runs it (_graphs)
    capture_sizes: tuple[int, ...] = ()  # batch sizes with captured graphs, ascending (none: no graphs)

    @property
    def client_latency_s(self) -> float:
        """Fixed latency on every request's tokens beyond the engine and the API server's queue: the
        scenario's frontend_overhead_s plus the API server's hand-offs (api_server.hop_latency_s)."""
        return self.frontend_overhead_s + self.api_server.hop_latency_s

    @property
    def gpus(self) -> int:
        """GPUs of one replica: TP per stage x PP stages x DP engines."""
        return self.tp * self.pp * self.dp

    @property
    def rank_gpus(self) -> int:
        """GPUs of one data-parallel engine (the whole replica without DP): TP x PP."""
        return self.tp * self.pp


def _async_scheduling(args: EngineArgs, hardware: HardwareProfile, defaults: VersionDefaults) -> bool:
    """Whether step k+1 is scheduled while step k still runs on the device. vLLM's engine core
    (v1/engine/core.py step_with_batch_queue) only keeps a second batch in flight while the first one's
    future is not done; on a CPU build the forward pass returns finished, so the loop behaves as a
    synchronous engine there whatever the flag says. VllmConfig.__post_init__ turns it off by default, and
    refuses it when asked, with a speculative method the version cannot overlap and (0.14) with pipeline
    parallelism; an engine of more GPUs than a node holds runs on the Ray executor by default, which does not
    support it (supports_async_scheduling False, 0.15-0.34): off by default there, as vLLM warns (asked for, it
    is on: the multiprocessing executor spans nodes when told to)."""
    spec = args.speculative_config
    asked = args.async_scheduling
    if spec is not None and spec.method not in defaults.async_spec_methods:
        if asked:
            raise ValueError(f"async_scheduling is not supported with speculative method {spec.method}")
        return False
    if args.pipeline_parallel_size > 1 and not defaults.async_with_pipeline_parallel:
        if asked:  # 0.14: "Async scheduling is not yet compatible with pipeline_parallel_size > 1"
            raise ValueError("async_scheduling is not compatible with pipeline_parallel_size > 1 (vLLM refuses it)")
        return False
    if asked is None and args.tensor_parallel_size * args.pipeline_parallel_size > hardware.gpus_per_node:
        return False
    wanted = defaults.async_scheduling if asked is None else asked
    return wanted and hardware.kind != "cpu"


def mla_block_size(block_size: int, hardware: HardwareProfile, qk_nope_head_dim: int) -> int:
    """The KV block size vLLM runs an MLA model with: its default attention backend needs its own (vLLM
    platforms/cuda.py CudaPlatformBase.check_and_update_config, the default-backend branch; read at commit
    002db49, the v1 attention registry of 0.13 and later). Blackwell (compute capability 10.x): FlashInfer MLA when
    qk_nope_head_dim is 128 (32 or a multiple of 64, else 64), else CUTLASS MLA (a multiple of 128, else 128);
    Hopper: FlashMLA (is_flashmla_dense_supported: capability 9.x or 10.x; a multiple of 64, else 64); other GPUs
    fall back to Triton MLA with the block size asked for. An explicit --block-size is overridden the same way.
    ROCm (vLLM 0.15.1 platforms/rocm.py: block size 16 unless asked; Triton MLA, or AITER MLA with
    VLLM_ROCM_USE_AITER) keeps the size asked for: AITER MLA's kernel pages of 1 token
    (AiterMLABackend.get_supported_kernel_block_sizes) split the KV manager's blocks (gpu_model_runner.py
    _select_common_block_size), they do not change them."""
    capability = hardware.cuda_compute_capability
    major = int(capability.split(".")[0]) if capability is not None else 0
    if major == 10 and qk_nope_head_dim == 128:
        return block_size if block_size == 32 or block_size % 64 == 0 else 64
    if major == 10:
        return block_size if block_size % 128 == 0 else 128
    if major == 9:
        return block_size if block_size % 64 == 0 else 64
    return block_size


def weight_dtype(args: EngineArgs, native_dtype: WeightDtype) -> WeightDtype:
    """The weights' format: --quantization, else the checkpoint's. A quantized checkpoint (fp8, int8, int4, MXFP4)
    keeps its format whatever --dtype says (the activations' dtype); a 16-bit one takes --dtype. MXFP4 is read from a
    checkpoint published in it (gpt-oss), never made when the weights load (vLLM's Mxfp4Config loads packed weights
    and has no online quantization), and such a checkpoint takes no other quantization (vLLM ModelConfig
    _verify_quantization: the model config's method must match the argument's)."""
    asked = args.quantization
    if (asked == "mxfp4") != (native_dtype == "mxfp4") and asked is not None:
        raise ArgumentError(
            "quantization",
            f"quantization {asked} does not match the checkpoint's {native_dtype}: vLLM refuses to start (an MXFP4 "
            "checkpoint, gpt-oss, is served in MXFP4 only, and MXFP4 is not made when the weights load)",
        )
    if asked is not None:
        return asked
    return native_dtype if args.dtype == "auto" or native_dtype not in ("bf16", "fp16") else args.dtype


def resolve_engine(
    args: EngineArgs,
    hardware: HardwareProfile,
    model_max_len: int,
    native_dtype: WeightDtype,
    mla_qk_nope_head_dim: int | None = None,
) -> ResolvedEngine:
    """Apply the version's defaults; raise ValueError (quoting values) on inconsistent arguments.
    mla_qk_nope_head_dim: the model's, for a multi-head latent attention model (None: not MLA)."""
    defaults = version_defaults(args.vllm_version)
    limits = engine_limits(args, hardware, defaults, model_max_len)
    block_size, measured = limits.block_size, limits.measured_kv_sizing
    engine = ResolvedEngine(
        tp=args.tensor_parallel_size,
        max_num_batched_tokens=limits.max_num_batched_tokens,
        max_num_seqs=limits.max_num_seqs,
        max_model_len=limits.max_model_len,
        block_size=(
            block_size if mla_qk_nope_head_dim is None else mla_block_size(block_size, hardware, mla_qk_nope_head_dim)
        ),
        gpu_memory_utilization=args.gpu_memory_utilization or (1.0 if measured else defaults.gpu_memory_utilization),
        measured_kv_sizing=measured,
        enable_prefix_caching=args.enable_prefix_caching and args.kv_cache_mode == "paged",
        enable_chunked_prefill=args.enable_chunked_prefill,
        long_prefill_token_threshold=args.long_prefill_token_threshold,
        scheduling_policy=args.scheduling_policy,
        weight_dtype=weight_dtype(args, native_dtype),
        kv_dtype="bf16" if args.kv_cache_dtype == "auto" else args.kv_cache_dtype,
        enforce_eager=args.enforce_eager,
        num_gpu_blocks_override=args.num_gpu_blocks_override,
        kv_cache_mode=args.kv_cache_mode,
        frontend_overhead_s=args.frontend_overhead_s,
        api_server=args.api_server or defaults.api_server,
        reserve_full_prompt=defaults.reserve_full_prompt,
        reserve_for_inflight_prefills=defaults.reserve_for_inflight_prefills,
    )
    return _with_features(engine, args, hardware, defaults, mla_qk_nope_head_dim)


def _with_features(
    engine: ResolvedEngine,
    args: EngineArgs,
    hardware: HardwareProfile,
    defaults: VersionDefaults,
    mla_qk_nope_head_dim: int | None,
) -> ResolvedEngine:
    """The engine with its arguments beyond the batch budget and the KV cache: CUDA graphs and async scheduling
    (either may refuse the arguments, in that order), parallelism, speculation, LoRA, KV tiers, admission limits."""
    # FlashMLA (an MLA model's backend on Hopper) runs FULL graphs for uniform batches only, as FlashAttention 2 does
    full_mixed = _flash_attention_3(hardware) and mla_qk_nope_head_dim is None
    batched = engine.max_num_batched_tokens
    compiled, cudagraph_mode, sizes = _graphs(args, hardware, engine.max_num_seqs, batched, full_mixed)
    return replace(
        engine,
        async_scheduling=_async_scheduling(args, hardware, defaults),
        iteration_overhead_s=defaults.iteration_overhead_s,
        decode_graph_iteration_s=defaults.decode_graph_iteration_s,
        pp=args.pipeline_parallel_size,
        speculative=args.speculative_config,
        kv_offloading_gib=args.kv_offloading_size or 0.0,
        lora_slots=args.max_loras if args.enable_lora else 0,
        max_lora_rank=args.max_lora_rank,
        max_cpu_loras=args.max_cpu_loras or args.max_loras,
        lmcache=(args.lmcache or LMCacheConfig()) if args.kv_transfer_config is not None else None,
        hybrid_kv_cache_manager=not args.disable_hybrid_kv_cache_manager,
        dp=args.data_parallel_size,
        max_num_queued_reqs=args.max_num_queued_reqs,
        max_num_queued_tokens=args.max_num_queued_tokens,
        compiled=compiled,
        cudagraph_mode=cudagraph_mode,
        capture_sizes=sizes,
    )


def _graphs(
    args: EngineArgs, hardware: HardwareProfile, max_num_seqs: int, max_num_batched_tokens: int, full_mixed: bool
) -> tuple[bool, CudagraphMode, tuple[int, ...]]:
    """(torch.compile runs, the CUDA-graph mode the engine runs, its capture sizes: none with mode NONE), by the
    rules of config/graphs.py: the optimization level's mode or the one asked for, FULL as far as the attention
    backend allows, no graphs on a CPU; the default cap min(2 x max_num_seqs x decode query length, 512)."""
    compiled, piecewise, mode = compile_and_mode(
        at_least(args.vllm_version, (0, 13)), args.optimization_level, args.enforce_eager, args.cudagraph_mode
    )
    if mode == "FULL" and not full_mixed:  # gpu_model_runner._check_and_update_cudagraph_mode
        mode = "FULL_AND_PIECEWISE" if piecewise else "FULL_DECODE_ONLY"
    if hardware.kind != "gpu" or mode == "NONE":
        return compiled, "NONE", ()
    spec = args.speculative_config
    query_len = 1 + (spec.num_speculative_tokens if spec is not None else 0)
    sizes = graph_sizes(
        args.cudagraph_capture_sizes,
        args.max_cudagraph_capture_size,
        min(max_num_seqs * query_len * 2, 512),
        max_num_batched_tokens,
        args.performance_mode == "interactivity",
    )
    return compiled, mode if sizes else "NONE", sizes


def _flash_attention_3(hardware: HardwareProfile) -> bool:
    """vLLM's default attention backend on this GPU runs FlashAttention 3 (Hopper, compute capability 9.x:
    vllm_flash_attn's get_flash_attn_version), whose cudagraph support is ALWAYS: mixed batches in FULL graphs."""
    capability = hardware.cuda_compute_capability
    return hardware.kind == "gpu" and capability is not None and capability.split(".")[0] == "9"
