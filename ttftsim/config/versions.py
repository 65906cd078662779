"""What each modelled vLLM version does by default (ttftsim/config/engine_versions.yaml): the profile of a version
and of the nearest modelled one below it, the warning for a version newer than every profile, and the API-server
costs each profile measured."""

from __future__ import annotations

from functools import cache
from importlib import resources

import yaml
from pydantic import Field

from ttftsim.config.base import StrictModel
from ttftsim.config.loading import parse_mapping

DEFAULT_VERSION = "0.15.1"  # the version modelled when a scenario names none


class ApiServerCosts(StrictModel):
    """CPU time of the API-server process's event loop per item of work (ttftsim/engine/api_server.py) and the
    fixed latency of its hand-offs; measured on the real server by benchmarks/vllm_cpu/api_server_costs.py."""

    per_request_s: float = Field(ge=0, le=1, description="Per request: HTTP parsing, request setup, hand-off")
    per_prompt_token_s: float = Field(ge=0, le=1e-3, description="Per prompt token: tokenization, block hashes")
    per_output_token_s: float = Field(ge=0, le=1e-2, description="Per generated token: detokenization, SSE")
    per_step_s: float = Field(
        default=0.0, ge=0, le=1e-1, description="Per engine step with outputs: receiving and dispatching the batch"
    )
    hop_latency_s: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Wall time of a request's hand-offs that is not the loop's CPU (HTTP, ZMQ to and from the "
        "engine core, process wake-ups): a fixed delay on each request's tokens, never queued (0 unless set)",
    )
    server_ttft_extra_s: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="vLLM's own TTFT (vllm:time_to_first_token_seconds: from the request's arrival_time, set once "
        "it is parsed and tokenized, to the output handler's processing of its first token) beyond the engine's "
        "arrival-to-first-token, at idle: the ZMQ hand-offs to and from the engine core and the output handler. "
        "Added to the engine's window in the predicted vLLM TTFT histogram (simulate --out DIR: metrics.prom, the "
        "server view, the HPA's ttft_p99_s); no request waits for it (0 unless set)",
    )


class VersionDefaults(StrictModel):
    """What one vLLM version does when an argument is left unset (ttftsim/config/engine_versions.yaml)."""

    gpu_memory_utilization: float = Field(gt=0, le=1, description="Default fraction of device memory")
    api_server: ApiServerCosts = Field(description="API-server costs (measured, see engine_versions.yaml)")
    big_gpu_tier: tuple[int, int] = Field(description="(tokens, seqs) defaults on >= 70 GiB GPUs except A100")
    small_gpu_tier: tuple[int, int] = Field(description="(tokens, seqs) defaults on other GPUs")
    huge_gpu_tier: tuple[int, int] | None = Field(
        default=None, description="(tokens, seqs) defaults on GPUs of >= 160 GiB (vLLM >= 0.28; None: none)"
    )
    cpu_tier: tuple[int, int] = Field(description="(tokens, seqs) defaults on CPU")
    reserve_full_prompt: bool = Field(description="Admission checks that the whole prompt fits in KV")
    reserve_for_inflight_prefills: bool = Field(
        description="A CPU-tier load is admitted only into blocks that in-flight prefills and loads do not still need"
    )
    async_scheduling: bool = Field(description="Async scheduling on unless disabled (vLLM >= 0.14)")
    async_with_pipeline_parallel: bool = Field(
        default=False,
        description="Async scheduling allowed, and on by default, with pipeline_parallel_size > 1 (vLLM >= 0.15: "
        "VllmConfig has no pipeline gate; 0.14 refuses it)",
    )
    async_spec_methods: tuple[str, ...] = Field(
        default=("eagle", "eagle3", "mtp"),
        description="Speculative methods that keep async scheduling (any other turns it off by default and is "
        "refused with --async-scheduling): EAGLE/MTP; draft_model from vLLM 0.28; every method from 0.33 (the V2 "
        "model runner, the default, runs ngram and draft models)",
    )
    block_size: int = Field(
        ge=1,
        description="KV block size when --block-size is not given, on an NVIDIA GPU (vLLM CacheConfig."
        "DEFAULT_BLOCK_SIZE, which FlashAttention and FlashInfer keep; ROCm's default backend asks for 16)",
    )
    measured_kv_sizing: bool = Field(
        description="The extensible KV cache (vLLM >= 0.34, on by default on GPUs): with gpu_memory_utilization "
        "unset (1.0) the cache is sized from the memory free after warm-up and CUDA-graph capture, less a margin "
        "of max(1 GiB, 0.75 x the activation peak) and the peak itself (perf/memory.py)"
    )
    iteration_overhead_s: float | None = Field(description="Per-iteration host overhead (null: hardware's)")
    decode_graph_iteration_s: float | None = Field(description="Same for CUDA-graph decode steps (null: hardware's)")


class VersionTable(StrictModel):
    versions: dict[str, VersionDefaults] = Field(description="Profiles by major.minor version")


@cache
def version_table() -> dict[str, VersionDefaults]:
    text = (resources.files("ttftsim.config") / "engine_versions.yaml").read_text(encoding="utf-8")
    data = {key: value for key, value in yaml.safe_load(text).items() if not key.startswith("x-")}  # anchors
    return parse_mapping(VersionTable, data, "engine_versions.yaml").versions


def _minor(version: str) -> tuple[int, int]:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ValueError(f"vLLM version {version!r} is not a version number") from None


def version_text(value: object) -> object:
    """A vllm_version as written, before the string check: an image tag's leading v dropped (v0.15.1 is 0.15.1);
    a number refused with the quoting it needs (YAML reads 0.15 as a number, and 0.10 as 0.1)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value[1:] if isinstance(value, str) and value[:1] in "vV" and value[1:2].isdigit() else value
    raise ValueError(
        'write the version in quotes, e.g. vllm_version: "0.20": YAML reads an unquoted version as a number (0.20 '
        "as 0.2)"
    )


def at_least(version: str, release: tuple[int, int]) -> bool:
    """Whether a vLLM version is this major.minor release or a later one (for behaviour that changed at a release
    no profile starts at)."""
    return _minor(version) >= release


def version_defaults(version: str) -> VersionDefaults:
    """The profile of this version, or of the nearest modelled version below it."""
    table = version_table()
    wanted = _minor(version)
    older = [key for key in table if _minor(key) <= wanted]
    if not older:
        raise ValueError(f"vLLM version {version!r} is older than every modelled version ({', '.join(table)})")
    return table[max(older, key=_minor)]


def version_warnings(version: str) -> list[str]:
    """A version newer than every modelled one runs on the newest profile (version_defaults): said, not silent,
    since a newer release may change the defaults the prediction rests on."""
    table = version_table()
    newest = max(table, key=_minor)
    if _minor(version) <= _minor(newest):
        return []
    return [
        f"vLLM {version} is newer than every modelled version ({', '.join(table)}): predicted with {newest}'s "
        f"defaults (gpu_memory_utilization, batch limits, async scheduling, API-server costs); check that release's "
        f"notes for changed defaults"
    ]
