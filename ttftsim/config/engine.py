"""Engine arguments with vLLM's own names (EngineArgs, the scenario's and the deploy file's `engine` section), as a
user writes them: None where vLLM applies a default. config/resolved_engine.py applies each modelled version's
defaults for a model and hardware.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ttftsim.config.base import StrictModel
from ttftsim.config.dtypes import KvDtype, WeightDtype
from ttftsim.config.graphs import CudagraphMode, PerformanceMode
from ttftsim.config.kv_transfer import KvTransferConfig, LMCacheConfig
from ttftsim.config.versions import DEFAULT_VERSION, ApiServerCosts, at_least, version_defaults, version_text

KvMode = Literal["paged", "static", "none"]


SpecMethod = Literal["ngram", "eagle", "eagle3", "mtp", "draft_model"]
# Per-position acceptance rate (a draft token is accepted, given the ones before it were) where a published
# figure exists, turned from a measured mean acceptance length AL = (1 - a^(k+1)) / (1 - a) (docs/engine-
# semantics.md 11): EAGLE on Llama-3-8B-Instruct, MT-bench, k=2: AL 1.89 (vllm-project/vllm#16035) -> 0.55;
# EAGLE-3 on Llama-3.1-8B-Instruct, MT-bench, k=7: AL 3.53 (vllm-project/vllm#26191) -> 0.74; DeepSeek-V3's
# MTP module: "acceptance rate of the second token prediction ranges between 85% and 90%" (DeepSeek-V3
# technical report, 5.4.3) -> 0.87. n-gram and draft-model acceptance depend on the workload and the pair of
# models: the scenario gives them.
PUBLISHED_ACCEPTANCE: dict[str, float] = {"eagle": 0.55, "eagle3": 0.74, "mtp": 0.87}


class SpeculativeConfig(StrictModel):
    """vLLM --speculative-config: a proposer drafts num_speculative_tokens tokens per running sequence after
    each step; the next step verifies them with the target model (k+1 tokens per sequence)."""

    method: SpecMethod = Field(description="ngram (prompt lookup), eagle, eagle3, mtp, or draft_model")
    num_speculative_tokens: int = Field(ge=1, le=16, description="Draft tokens per sequence and step (k)")
    acceptance_rate: float | None = Field(
        default=None,
        gt=0,
        lt=1,
        description="Probability a draft token is accepted given the ones before it were (default: the "
        "published figure for eagle, eagle3, mtp; required for ngram and draft_model)",
    )
    model: str | None = Field(default=None, description="draft_model: the draft model (preset or config.json)")

    @model_validator(mode="after")
    def _consistent(self) -> SpeculativeConfig:
        if self.acceptance_rate is None and self.method not in PUBLISHED_ACCEPTANCE:
            raise ValueError(
                f"acceptance_rate is required for method {self.method} (it depends on the workload; "
                "measure it with vLLM's spec-decode metrics)"
            )
        if (self.method == "draft_model") != (self.model is not None):
            raise ValueError("model names the draft model for method draft_model, and only for it")
        return self

    @property
    def acceptance(self) -> float:
        return self.acceptance_rate if self.acceptance_rate is not None else PUBLISHED_ACCEPTANCE[self.method]


class EngineArgs(StrictModel):
    """vLLM engine arguments (same names as `vllm serve --...`); None means the version's default."""

    vllm_version: str = Field(default=DEFAULT_VERSION, description="Modelled vLLM version (defaults follow it)")
    tensor_parallel_size: int = Field(default=1, ge=1, le=64, description="GPUs per pipeline stage (TP)")
    pipeline_parallel_size: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Pipeline stages (PP): the layers split over PP groups of TP GPUs, PP batches in flight",
    )
    data_parallel_size: int = Field(
        default=1,
        ge=1,
        le=64,
        description="vLLM --data-parallel-size: DP engines of TP x PP GPUs each, every one with its own scheduler "
        "and KV cache behind the server's load balancer; an MoE model's ranks step together (docs/engine-"
        "semantics.md 16)",
    )
    enable_expert_parallel: bool = Field(
        default=False,
        description="vLLM --enable-expert-parallel: each TP GPU holds whole routed experts (E / TP, the first "
        "E mod TP one more) instead of a slice of every expert; MoE models only (docs/engine-semantics.md 16)",
    )
    expert_load_imbalance: float | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="ttftsim's, not vLLM's: with enable_expert_parallel, the busiest GPU's routed token-expert "
        "picks over the mean (the inverse of the balancedness vLLM logs with --eplb-config "
        "'{\"log_balancedness\": true}'); null: uniformly random routing, the expected busiest of TP x DP GPUs",
    )
    max_num_batched_tokens: int | None = Field(default=None, ge=1, description="Token budget per iteration")
    max_num_seqs: int | None = Field(
        default=None,
        ge=1,
        description="Most sequences running at once (default: the version's tier for the GPU, at most "
        "max_num_batched_tokens)",
    )
    max_model_len: int | None = Field(default=None, ge=16, description="Longest prompt + output (default: model's)")
    allow_long_max_model_len: bool = Field(
        default=False,
        description="vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a max_model_len above the model's "
        "max_position_embeddings is a warning, not an error",
    )
    block_size: Literal[8, 16, 32, 64, 128] | None = Field(
        default=None, description="Tokens per KV-cache block (None: the version's default for the GPU; 16 on CPUs)"
    )
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1, description="Fraction of device memory")
    enable_extensible_kv_cache: bool | None = Field(
        default=None,
        description="vLLM >= 0.34 --[no-]enable-extensible-kv-cache: size the KV cache from the memory measured "
        "after warm-up (None: on for GPUs from 0.34, where the version has it)",
    )
    enable_prefix_caching: bool = Field(
        default=True,
        description="Reuse KV blocks of identical prefixes (paged mode only: off with kv_cache_mode static or "
        "none, and setting it true with them is an error)",
    )
    enable_chunked_prefill: bool = Field(default=True, description="Split long prompts across iterations")
    long_prefill_token_threshold: int = Field(default=0, ge=0, description="Per-request chunk cap (0 = none)")
    max_num_queued_reqs: int | None = Field(
        default=None,
        ge=0,
        description="vLLM >= 0.29: the API server answers HTTP 503 to a request that would make the unfinished ones "
        "(waiting and running, over all data-parallel ranks) more than this (None: no limit)",
    )
    max_num_queued_tokens: int | None = Field(
        default=None,
        ge=0,
        description="vLLM >= 0.29: the API server answers HTTP 503 while the prompt tokens of the unfinished requests "
        "without a first token are at least this (None: no limit)",
    )
    scheduling_policy: Literal["fcfs", "priority"] = Field(default="fcfs", description="Waiting-queue order")
    dtype: Literal["bf16", "fp16", "auto"] = Field(default="auto", description="Activation dtype")
    quantization: WeightDtype | None = Field(default=None, description="Weight format (None: checkpoint dtype)")
    kv_cache_dtype: KvDtype | Literal["auto"] = Field(default="auto", description="KV-cache element format")
    enforce_eager: bool = Field(
        default=False, description="Disable CUDA graphs and torch.compile (vLLM: -O0 from 0.13; no compilation before)"
    )
    optimization_level: int | None = Field(
        default=None,
        ge=0,
        le=3,
        description="vLLM -O (from 0.13): 0 no torch.compile and no CUDA graphs, 1 piecewise graphs, 2 (the "
        "default) and 3 FULL decode graphs beside piecewise ones. Before 0.13, the compilation level: 3 (the default) "
        "vLLM's piecewise compile with graphs, 1 and 2 torch.compile without graphs, 0 neither",
    )
    cudagraph_mode: CudagraphMode | None = Field(
        default=None,
        description="vLLM compilation_config.cudagraph_mode (None: the optimization level's). PIECEWISE and "
        "FULL_AND_PIECEWISE need the piecewise compile (NONE without it); FULL runs mixed batches in FULL graphs "
        "only where the attention backend can (FlashAttention 3, Hopper), else FULL_AND_PIECEWISE (compiled) or "
        "FULL_DECODE_ONLY",
    )
    cudagraph_capture_sizes: list[int] | None = Field(
        default=None,
        min_length=1,
        description="vLLM compilation_config.cudagraph_capture_sizes (None: the default grid)",
    )
    max_cudagraph_capture_size: int | None = Field(
        default=None,
        ge=1,
        description="vLLM compilation_config.max_cudagraph_capture_size (None: min(2 x max_num_seqs, 512)), capped "
        "at max_num_batched_tokens",
    )
    performance_mode: PerformanceMode = Field(
        default="balanced",
        description="vLLM --performance-mode (0.17+): throughput doubles the default max_num_batched_tokens and "
        "max_num_seqs (those left unset), interactivity captures every batch size up to 32",
    )
    async_scheduling: bool | None = Field(
        default=None,
        description="Schedule step k+1 while step k runs (vLLM --async-scheduling; None: the version's default)",
    )
    num_gpu_blocks_override: int | None = Field(default=None, ge=1, description="Force the KV block count")
    speculative_config: SpeculativeConfig | None = Field(default=None, description="Speculative decoding")
    enable_lora: bool = Field(default=False, description="Serve LoRA adapters (vLLM --enable-lora)")
    max_loras: int = Field(default=1, ge=1, le=256, description="Adapters in one batch (GPU slots; vLLM default 1)")
    max_lora_rank: int = Field(default=16, ge=1, le=512, description="Largest adapter rank (vLLM default 16)")
    max_cpu_loras: int | None = Field(
        default=None, ge=1, description="Adapters cached in host memory (default: max_loras, as vLLM)"
    )
    lora_read_bytes_per_s: float = Field(
        default=2e9,
        gt=0,
        description="Reading an adapter not cached in host memory from local disk, bytes/s (an NVMe-class "
        "assumption: set yours)",
    )
    kv_offloading_size: float | None = Field(
        default=None,
        gt=0,
        le=65536,
        description="GiB of host memory for offloaded KV blocks, summed over the TP ranks (vLLM "
        "--kv-offloading-size, native CPU backend): full blocks are stored as they fill, and a prefix found "
        "there is copied back instead of recomputed (prefix caching on)",
    )
    disable_hybrid_kv_cache_manager: bool | None = Field(
        default=None,
        description="vLLM --disable-hybrid-kv-cache-manager: true, a model with full and sliding-window layers "
        "keeps every token in every layer (its windowed layers' KV as full attention); null: as vLLM decides (off "
        "with a KV connector)",
    )
    kv_transfer_config: KvTransferConfig | None = Field(
        default=None,
        description="vLLM --kv-transfer-config: LMCacheConnectorV1 stores prompt KV in chunks to LMCache's tiers "
        "and loads a prefix found there (docs/engine-semantics.md 14)",
    )
    lmcache: LMCacheConfig | None = Field(
        default=None,
        description="LMCache's settings, as its config file or LMCACHE_* variables give them (with "
        "kv_transfer_config; null: LMCache's defaults, a 5 GB CPU tier)",
    )
    kv_cache_mode: KvMode = Field(
        default="paged",
        description="paged (vLLM), static (reserve max_model_len per sequence), none (recompute every step)",
    )
    frontend_overhead_s: float = Field(
        default=0.0, ge=0, le=60, description="Extra fixed latency added to TTFT (network, client), seconds"
    )
    api_server: ApiServerCosts | None = Field(
        default=None, description="API-server work per request and token (default: the version's measured costs)"
    )
    api_server_shares_core: bool = Field(
        default=False,
        description="The API server and the engine core run on one CPU core (a pod or host with fewer cores than "
        "its processes): each step also waits for the API server's work on its outputs (per step and per token)",
    )
    calibration: str | None = Field(
        default=None,
        max_length=4096,
        description="A deployment calibration file written by `ttftsim fit` (path relative to this file): its "
        "fitted factors (GEMM and attention efficiency, per-step host overhead, API-server cost) apply to "
        "deployments on the hardware it was fitted on",
    )

    @field_validator("vllm_version", mode="before")
    @classmethod
    def _as_written(cls, value: object) -> object:
        return version_text(value)

    @field_validator("vllm_version")
    @classmethod
    def _a_version(cls, version: str) -> str:
        version_defaults(version)  # a number, and not older than every modelled release (the error names the field)
        return version

    @model_validator(mode="after")
    def _consistent(self) -> EngineArgs:
        if (
            self.kv_cache_mode != "paged"
            and self.enable_prefix_caching
            and "enable_prefix_caching" in self.model_fields_set
        ):
            raise ValueError(
                f"enable_prefix_caching true with kv_cache_mode {self.kv_cache_mode}: prefix caching shares paged "
                "KV blocks only (set it false, or kv_cache_mode paged)"
            )
        if self.max_cpu_loras is not None and self.max_cpu_loras < self.max_loras:
            raise ValueError(f"max_cpu_loras {self.max_cpu_loras} is below max_loras {self.max_loras} (vLLM refuses)")
        if self.kv_offloading_size is not None and (self.kv_cache_mode != "paged" or not self.enable_prefix_caching):
            raise ValueError(
                "kv_offloading_size needs paged KV blocks with prefix caching on: the CPU tier finds blocks by "
                "their prefix hashes"
            )
        if self.expert_load_imbalance is not None and not self.enable_expert_parallel:
            raise ValueError("expert_load_imbalance without enable_expert_parallel (it is the load of an EP GPU)")
        if self.data_parallel_size > 1 and self.pipeline_parallel_size > 1:
            raise ValueError("data_parallel_size > 1 with pipeline_parallel_size > 1 is not modelled")
        if (self.max_num_queued_reqs, self.max_num_queued_tokens) != (None, None) and not at_least(
            self.vllm_version, (0, 29)
        ):
            raise ValueError(f"max_num_queued_reqs / max_num_queued_tokens: vLLM {self.vllm_version} has none (0.29+)")
        if self.performance_mode != "balanced" and not at_least(self.vllm_version, (0, 17)):
            raise ValueError(f"performance_mode: vLLM {self.vllm_version} has none (0.17+)")
        if self.cudagraph_capture_sizes is not None and min(self.cudagraph_capture_sizes) < 1:
            raise ValueError(f"cudagraph_capture_sizes {self.cudagraph_capture_sizes}: every size must be >= 1")
        self._consistent_kv_transfer()
        return self

    def _consistent_kv_transfer(self) -> None:
        if self.lmcache is not None and self.kv_transfer_config is None:
            raise ValueError("lmcache settings without kv_transfer_config (kv_connector LMCacheConnectorV1)")
        if self.kv_transfer_config is None:
            return
        if self.kv_offloading_size is not None:
            raise ValueError(
                "kv_offloading_size and kv_transfer_config together: vLLM takes one KV connector (--kv-offloading-size "
                "sets the OffloadingConnector)"
            )
        if self.kv_cache_mode != "paged" or not self.enable_prefix_caching:
            raise ValueError(
                "kv_transfer_config needs paged KV blocks with prefix caching on (ttftsim finds chunks "
                "by block prefix hashes)"
            )
        chunk = (self.lmcache or LMCacheConfig()).chunk_size
        block = self.block_size or 16  # every default is a multiple of 16 (resolve_engine checks the version's)
        if chunk % block:
            raise ValueError(
                f"lmcache chunk_size {chunk} is not a multiple of block_size {block} (ttftsim keys a chunk "
                "by its last block's prefix hash)"
            )
        if self.pipeline_parallel_size > 1:
            raise ValueError("kv_transfer_config with pipeline_parallel_size > 1 is not modelled")
