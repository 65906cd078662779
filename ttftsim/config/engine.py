"""Engine arguments with vLLM's own names, and the defaults each modelled vLLM version applies.

Unset arguments (None) take the version's default for the hardware (serving-semantics.md 3.1): batch
tiers by device memory (>= 70 GiB and not A100: 8192 tokens / 1024 seqs in recent versions; otherwise
2048 / 256; CPU 2048 / 128), gpu_memory_utilization 0.9 (0.92 from 0.33), block 16, prefix caching and
chunked prefill on, FCFS, preemption by recompute of the last running request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from ttftsim.config.base import StrictModel
from ttftsim.config.dtypes import KvDtype, WeightDtype
from ttftsim.config.hardware import HardwareProfile

KvMode = Literal["paged", "static", "none"]


class EngineArgs(StrictModel):
    """vLLM engine arguments (same names as `vllm serve --...`); None means the version's default."""

    vllm_version: str = Field(default="0.15.1", description="Modelled vLLM version (defaults follow it)")
    tensor_parallel_size: int = Field(default=1, ge=1, le=64, description="GPUs per replica (TP)")
    max_num_batched_tokens: int | None = Field(default=None, ge=1, description="Token budget per iteration")
    max_num_seqs: int | None = Field(default=None, ge=1, description="Most sequences running at once")
    max_model_len: int | None = Field(default=None, ge=16, description="Longest prompt + output (default: model's)")
    block_size: Literal[8, 16, 32, 64, 128] = Field(default=16, description="Tokens per KV-cache block")
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1, description="Fraction of device memory")
    enable_prefix_caching: bool = Field(default=True, description="Reuse KV blocks of identical prefixes")
    enable_chunked_prefill: bool = Field(default=True, description="Split long prompts across iterations")
    long_prefill_token_threshold: int = Field(default=0, ge=0, description="Per-request chunk cap (0 = none)")
    scheduling_policy: Literal["fcfs", "priority"] = Field(default="fcfs", description="Waiting-queue order")
    dtype: Literal["bf16", "fp16", "auto"] = Field(default="auto", description="Activation dtype")
    quantization: WeightDtype | None = Field(default=None, description="Weight format (None: checkpoint dtype)")
    kv_cache_dtype: KvDtype | Literal["auto"] = Field(default="auto", description="KV-cache element format")
    enforce_eager: bool = Field(default=False, description="Disable CUDA graphs")
    num_gpu_blocks_override: int | None = Field(default=None, ge=1, description="Force the KV block count")
    kv_cache_mode: KvMode = Field(
        default="paged",
        description="paged (vLLM), static (reserve max_model_len per sequence), none (recompute every step)",
    )
    frontend_overhead_s: float | None = Field(
        default=None, ge=0, description="API server + tokenization time added to TTFT (default: version's)"
    )


@dataclass(frozen=True)
class VersionDefaults:
    """What one vLLM version does when an argument is left unset."""

    gpu_memory_utilization: float
    frontend_overhead_s: float
    big_gpu_tier: tuple[int, int]  # (max_num_batched_tokens, max_num_seqs) on >= 70 GiB non-A100 GPUs
    small_gpu_tier: tuple[int, int]
    cpu_tier: tuple[int, int]
    reserve_full_prompt: bool  # 0.33: admission checks that the whole prompt fits in KV


VERSIONS: dict[str, VersionDefaults] = {
    "0.11": VersionDefaults(0.9, 0.004, (8192, 1024), (2048, 256), (2048, 128), False),
    "0.15": VersionDefaults(0.9, 0.003, (8192, 1024), (2048, 256), (2048, 128), False),
    "0.32": VersionDefaults(0.92, 0.004, (8192, 1024), (2048, 256), (2048, 128), True),
    "0.33": VersionDefaults(0.92, 0.004, (8192, 1024), (2048, 256), (2048, 128), True),
}


def version_defaults(version: str) -> VersionDefaults:
    minor = ".".join(version.split(".")[:2])
    if minor not in VERSIONS:
        raise ValueError(f"vLLM version {version!r} is not modelled (modelled: {', '.join(VERSIONS)})")
    return VERSIONS[minor]


@dataclass(frozen=True)
class ResolvedEngine:
    """Engine arguments with every default applied for a model, hardware and version."""

    tp: int
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    block_size: int
    gpu_memory_utilization: float
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

    @property
    def cudagraph_max_seqs(self) -> int:
        """vLLM: max_cudagraph_capture_size = min(max_num_seqs x 2, 512); none when eager."""
        return 0 if self.enforce_eager else min(self.max_num_seqs * 2, 512)


def _tier(hardware: HardwareProfile, defaults: VersionDefaults) -> tuple[int, int]:
    if hardware.kind == "cpu":
        return defaults.cpu_tier
    big = hardware.memory_bytes >= 70 * 2**30 and not hardware.name.upper().startswith("A100")
    return defaults.big_gpu_tier if big else defaults.small_gpu_tier


def resolve_engine(
    args: EngineArgs, hardware: HardwareProfile, model_max_len: int, native_dtype: WeightDtype
) -> ResolvedEngine:
    """Apply the version's defaults; raise ValueError (quoting values) on inconsistent arguments."""
    defaults = version_defaults(args.vllm_version)
    tier_tokens, tier_seqs = _tier(hardware, defaults)
    max_model_len = args.max_model_len or model_max_len
    if max_model_len > model_max_len:
        raise ValueError(f"max_model_len {max_model_len} exceeds the model's max_position_embeddings {model_max_len}")
    batched = args.max_num_batched_tokens or tier_tokens
    if not args.enable_chunked_prefill and args.max_num_batched_tokens is None:
        batched = max(batched, max_model_len)  # vLLM raises the budget to max_model_len without chunking
    if not args.enable_chunked_prefill and batched < max_model_len:
        raise ValueError(
            f"with chunked prefill off, max_num_batched_tokens ({batched}) must be >= max_model_len ({max_model_len})"
        )
    weight = args.quantization or (native_dtype if args.dtype == "auto" else args.dtype)
    return ResolvedEngine(
        tp=args.tensor_parallel_size,
        max_num_batched_tokens=batched,
        max_num_seqs=args.max_num_seqs or tier_seqs,
        max_model_len=max_model_len,
        block_size=args.block_size,
        gpu_memory_utilization=args.gpu_memory_utilization or defaults.gpu_memory_utilization,
        enable_prefix_caching=args.enable_prefix_caching and args.kv_cache_mode == "paged",
        enable_chunked_prefill=args.enable_chunked_prefill,
        long_prefill_token_threshold=args.long_prefill_token_threshold,
        scheduling_policy=args.scheduling_policy,
        weight_dtype=weight,
        kv_dtype="bf16" if args.kv_cache_dtype == "auto" else args.kv_cache_dtype,
        enforce_eager=args.enforce_eager,
        num_gpu_blocks_override=args.num_gpu_blocks_override,
        kv_cache_mode=args.kv_cache_mode,
        frontend_overhead_s=(
            args.frontend_overhead_s if args.frontend_overhead_s is not None else defaults.frontend_overhead_s
        ),
        reserve_full_prompt=defaults.reserve_full_prompt,
    )
