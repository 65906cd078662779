"""The limits one engine starts with, resolved for a model and hardware and checked in a fixed order:
max_model_len, the batch budget (max_num_batched_tokens, max_num_seqs: each version's tiers by device memory,
doubled in throughput mode; without chunked prefill the token budget covers max_model_len), the KV block size
(LMCache's chunk a multiple of it) and whether the KV cache is sized from measured memory (vLLM >= 0.34).
resolved_engine.py builds the engine's arguments on them (an MLA backend's own block size comes after)."""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.config.engine import EngineArgs
from ttftsim.config.hardware import HardwareProfile
from ttftsim.config.kv_transfer import LMCacheConfig
from ttftsim.config.versions import VersionDefaults, version_defaults
from ttftsim.errors import ArgumentError


@dataclass(frozen=True)
class EngineLimits:
    """An engine's context length, batch budget and KV block, as engine_limits resolved and checked them."""

    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    block_size: int  # asked for or the version's default, before an MLA backend's own (mla_block_size)
    measured_kv_sizing: bool  # vLLM >= 0.34's extensible KV cache (perf/memory.py)


def engine_limits(
    args: EngineArgs, hardware: HardwareProfile, defaults: VersionDefaults, model_max_len: int
) -> EngineLimits:
    """The limits of an engine with these arguments; raise ValueError (quoting values) on the first inconsistent
    one, in the order checked here."""
    tier_tokens, tier_seqs = _tier(hardware, defaults)
    max_model_len = args.max_model_len or model_max_len
    if max_model_len > model_max_len and not args.allow_long_max_model_len:  # vLLM _get_and_verify_max_len
        raise ArgumentError(
            "max_model_len",
            f"max_model_len {max_model_len} exceeds the model's max_position_embeddings {model_max_len}",
        )
    if args.performance_mode == "throughput":  # arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args
        tier_tokens, tier_seqs = 2 * tier_tokens, 2 * tier_seqs
    batched = args.max_num_batched_tokens or tier_tokens
    if not args.enable_chunked_prefill and args.max_num_batched_tokens is None:
        batched = max(batched, max_model_len)  # vLLM raises the budget to max_model_len without chunking
    if not args.enable_chunked_prefill and batched < max_model_len:
        raise ArgumentError(
            "max_num_batched_tokens",
            f"with chunked prefill off, max_num_batched_tokens ({batched}) must be >= max_model_len ({max_model_len})",
        )
    block_size = _block_size(args, hardware, defaults)
    chunk = (args.lmcache or LMCacheConfig()).chunk_size
    if args.kv_transfer_config is not None and chunk % block_size:
        raise ValueError(
            f"lmcache chunk_size {chunk} is not a multiple of block_size {block_size} (the default of "
            f"vLLM {args.vllm_version} here; ttftsim keys a chunk by its last block's prefix hash)"
        )
    measured = _measured_kv_sizing(args, hardware, defaults)
    # an unset max_num_seqs is the tier's, at most the token budget (arg_utils.py, 0.10 to 0.34:
    # max_num_seqs = min(default, max_num_batched_tokens)): only one the user set can exceed the budget
    max_num_seqs = args.max_num_seqs or min(tier_seqs, batched)
    if batched < max_num_seqs:  # SchedulerConfig.verify_max_model_len (0.11-0.34): vLLM exits at start
        raise ArgumentError(
            "max_num_seqs",  # the user's (a default is at most the budget)
            f"max_num_batched_tokens ({batched}) must be greater than or equal to max_num_seqs ({max_num_seqs}) "
            "(vLLM refuses to start)",
        )
    return EngineLimits(max_model_len, batched, max_num_seqs, block_size, measured)


def default_limits(hardware: HardwareProfile, version: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that this vLLM version's API server takes on this hardware."""
    return _tier(hardware, version_defaults(version))


def _tier(hardware: HardwareProfile, defaults: VersionDefaults) -> tuple[int, int]:
    if hardware.kind == "cpu":
        return defaults.cpu_tier
    if defaults.huge_gpu_tier is not None and hardware.memory_bytes >= 160 * 2**30:  # vLLM's own tests
        return defaults.huge_gpu_tier
    big = hardware.memory_bytes >= 70 * 2**30 and "a100" not in hardware.device_name.lower()
    return defaults.big_gpu_tier if big else defaults.small_gpu_tier


def _block_size(args: EngineArgs, hardware: HardwareProfile, defaults: VersionDefaults) -> int:
    """--block-size, else the version's default on an NVIDIA GPU (vLLM CacheConfig.DEFAULT_BLOCK_SIZE, which
    FlashAttention and FlashInfer keep: Platform._preferred_block_size_for_backends), else 16: ROCm's default
    attention backend asks for 16 (v1/attention/backends/rocm_attn.py get_preferred_block_size, 0.34), and CPUs
    keep ttftsim's 16."""
    if args.block_size is not None:
        return args.block_size
    return defaults.block_size if hardware.kind == "gpu" and hardware.cuda_compute_capability is not None else 16


def _measured_kv_sizing(args: EngineArgs, hardware: HardwareProfile, defaults: VersionDefaults) -> bool:
    """vLLM >= 0.34's extensible KV cache: on by default on CUDA and ROCm (config/cache.py
    enable_extensible_kv_cache None), never on a CPU; asking for it on a version without it is an error."""
    if args.enable_extensible_kv_cache and not defaults.measured_kv_sizing:
        raise ArgumentError(
            "enable_extensible_kv_cache",
            f"enable_extensible_kv_cache: vLLM {args.vllm_version} has no extensible KV cache (0.34+)",
        )
    wanted = defaults.measured_kv_sizing if args.enable_extensible_kv_cache is None else args.enable_extensible_kv_cache
    return wanted and hardware.kind == "gpu"
