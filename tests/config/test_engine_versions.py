"""The defaults each modelled vLLM version applies, as read in each release's wheel (engine_versions.yaml)."""

from __future__ import annotations

import pytest

from ttftsim.config.engine import EngineArgs
from ttftsim.config.resolved_engine import resolve_engine
from ttftsim.hardware.catalog import load_hardware


def _resolved(version: str, hardware: str = "H100-SXM5-80GB", **args: object):  # type: ignore[no-untyped-def]
    return resolve_engine(EngineArgs(vllm_version=version, **args), load_hardware(hardware), 4096, "bf16")


@pytest.mark.parametrize(
    ("version", "utilization", "reserve_full_prompt"),
    # gpu_memory_utilization 0.9 -> 0.92 in 0.20.0 (config/cache.py); scheduler_reserve_full_isl from 0.19.0
    [("0.15.1", 0.9, False), ("0.18.0", 0.9, False), ("0.19.0", 0.9, True), ("0.20.0", 0.92, True),
     ("0.27.0", 0.92, True), ("0.33.0", 0.92, True)],
)  # fmt: skip
def test_memory_share_and_whole_prompt_admission_follow_the_release(
    version: str, utilization: float, reserve_full_prompt: bool
) -> None:
    engine = _resolved(version)
    assert (engine.gpu_memory_utilization, engine.reserve_full_prompt) == (utilization, reserve_full_prompt)
    assert engine.block_size == 16 and not engine.measured_kv_sizing


def test_gpus_of_160_gib_take_the_largest_batch_defaults_from_028() -> None:
    """engine/arg_utils.py from 0.28.0: device memory >= 160 GiB -> 16384 tokens, 1024 sequences (API server)."""
    assert (
        _resolved("0.27.0", "B200-SXM-180GB").max_num_batched_tokens,
        _resolved("0.27.0", "B200-SXM-180GB").max_num_seqs,
    ) == (8192, 1024)
    assert (
        _resolved("0.28.0", "B200-SXM-180GB").max_num_batched_tokens,
        _resolved("0.28.0", "B200-SXM-180GB").max_num_seqs,
    ) == (16384, 1024)
    assert _resolved("0.28.0", "MI300X-192GB").max_num_batched_tokens == 16384
    assert _resolved("0.28.0", "H200-SXM-141GB").max_num_batched_tokens == 8192
    assert _resolved("0.28.0", "A100-SXM4-80GB").max_num_batched_tokens == 2048


def test_034_takes_64_token_blocks_on_nvidia_and_sizes_the_kv_cache_from_measured_memory() -> None:
    """vLLM 0.34: DEFAULT_BLOCK_SIZE 64 (FlashAttention keeps it; ROCm's default backend asks for 16); the
    extensible KV cache on by default on GPUs, with gpu_memory_utilization unset meaning 1.0."""
    engine = _resolved("0.34.0")
    assert (engine.block_size, engine.gpu_memory_utilization, engine.measured_kv_sizing) == (64, 1.0, True)
    assert _resolved("0.34.0", "MI300X-192GB").block_size == 16
    assert _resolved("0.34.0", block_size=16).block_size == 16  # --block-size wins
    asked = _resolved("0.34.0", gpu_memory_utilization=0.9)
    assert (asked.gpu_memory_utilization, asked.measured_kv_sizing) == (0.9, True)
    off = _resolved("0.34.0", enable_extensible_kv_cache=False)
    assert (off.gpu_memory_utilization, off.measured_kv_sizing) == (0.92, False)
    cpu = _resolved("0.34.0", "CPU-host")
    assert (cpu.block_size, cpu.measured_kv_sizing) == (16, False)
    with pytest.raises(ValueError, match="has no extensible KV cache"):
        _resolved("0.33.0", enable_extensible_kv_cache=True)


def test_a_version_is_read_as_an_image_tag_writes_it_and_a_number_is_refused_with_the_quotes_it_needs() -> None:
    """vllm/vllm-openai:v0.15.1's tag is 0.15.1; an unquoted 0.15 in YAML is a number (and 0.10 would be 0.1)."""
    from pydantic import ValidationError

    from ttftsim.config.deploy import Deploy

    assert EngineArgs(vllm_version="v0.15.1").vllm_version == "0.15.1"
    assert EngineArgs.model_validate({"vllm_version": "V0.20"}).vllm_version == "0.20"
    unquoted = r"quotes, e.g. vllm_version: \"0.20\": YAML reads an unquoted version as a number \(0.20 as 0.2\)"
    with pytest.raises(ValidationError, match=unquoted):
        EngineArgs.model_validate({"vllm_version": 0.20})  # the 0.20 profile: not echoed back as "0.2"
    with pytest.raises(ValidationError, match="write the version in quotes"):
        Deploy.model_validate({"model": "m", "traffic": {}, "slo": {"ttft_p99_s": 1}, "vllm_version": 0.15})
    with pytest.raises(ValidationError, match="vLLM version 'vx' is not a version number"):  # not a tag: refused
        EngineArgs(vllm_version="vx")
