"""vLLM's KV-cache groups of sliding-window models, and the memory plan's blocks under them, by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.iteration import Deployment
from ttftsim.perf.kv_groups import KvCacheGroups
from ttftsim.perf.memory import DoesNotFitError, MemorySettings, one_sequence_bytes, plan_memory

H100 = "H100-SXM5-80GB"


@pytest.mark.parametrize(
    ("name", "groups", "padded"),
    [
        ("Llama-3.1-8B", KvCacheGroups(1, 0, 32), 32),  # no window: one group of every layer
        ("Mistral-7B-v0.1", KvCacheGroups(0, 1, 32, 4096), 32),  # every layer windowed: one sliding group
        ("gpt-oss-20b", KvCacheGroups(1, 1, 12, 128), 24),  # 12 full, 12 sliding
        ("gemma-2-9b", KvCacheGroups(1, 1, 21, 4096), 42),
        ("gemma-3-27b-pt", KvCacheGroups(1, 6, 10, 1024), 70),  # 10 full, 52 sliding: 6 groups of 10, 8 padding
        ("gemma-3-1b-pt", KvCacheGroups(1, 6, 4, 512), 28),  # 4 full, 22 sliding: 6 groups of 4, 2 padding
    ],
)
def test_groups_of_the_presets(name: str, groups: KvCacheGroups, padded: int) -> None:
    assert KvCacheGroups.of(load_model(name)) == groups
    assert groups.padded_layers == padded


def test_near_equal_kinds_pad_the_smaller_up() -> None:
    """12 sliding and 13 full layers (gpt-oss-20b with an EAGLE layer, vLLM's own example): 13 < 1.25 x 12, so
    two groups of 13, not 12 and 24."""
    spec = load_model("gpt-oss-20b").model_copy(update={"num_hidden_layers": 25})
    assert KvCacheGroups.of(spec) == KvCacheGroups(1, 1, 13, 128)


def test_hybrid_manager_off_keeps_every_layer_full_unless_all_are_windowed() -> None:
    assert KvCacheGroups.of(load_model("gemma-3-27b-pt"), hybrid=False) == KvCacheGroups(1, 0, 62)
    assert KvCacheGroups.of(load_model("Mistral-7B-v0.1"), hybrid=False) == KvCacheGroups(0, 1, 32, 4096)


def test_mistral_blocks_on_one_h100() -> None:
    """Mistral-7B-v0.1: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes = 131,072 bytes a token; one group, so
    vLLM's page of 16 tokens x 8 x 128 x 2 x 2 = 65,536 bytes over 32 layers: 60,841,884,058 // 2,097,152."""
    plan = plan_memory(Deployment(load_model("Mistral-7B-v0.1"), load_hardware(H100)), MemorySettings())
    assert plan.kv_bytes_per_token == 131_072
    assert plan.kv_cache_bytes == 60_841_884_058
    assert plan.num_blocks == plan.vllm_num_blocks(KvCacheGroups(0, 1, 32, 4096)) == 60_841_884_058 // 2_097_152
    assert plan.num_blocks == 29_011


def test_gpt_oss_20b_blocks_on_one_h100() -> None:
    """gpt-oss-20b in bf16: 24 layers x 8 KV heads x 64 x 2 x 2 = 49,152 bytes a token; two groups of 12,
    vLLM's page 16 x 8 x 64 x 2 x 2 = 32,768 bytes, num_blocks = 33,487,579,418 // (32,768 x 12) = 85,163 of
    one group each; a block here is one in each group: 42,581."""
    plan = plan_memory(Deployment(load_model("gpt-oss-20b"), load_hardware(H100)), MemorySettings())
    assert plan.kv_bytes_per_token == 49_152
    assert plan.kv_cache_bytes == 33_487_579_418
    assert plan.vllm_num_blocks(KvCacheGroups(1, 1, 12, 128)) == 33_487_579_418 // 393_216 == 85_163
    assert plan.num_blocks == 85_163 // 2 == 42_581


def test_gemma_3_padding_layers_cost_kv_memory() -> None:
    """Gemma-3-27b (16 KV heads of 128: 8,192 bytes a token per layer): 7 groups of 10 layers hold 70 layer
    pages a token, 8 of them padding; with the hybrid manager off, 62."""
    model, hw = load_model("gemma-3-27b-pt"), load_hardware(H100)
    plan = plan_memory(Deployment(model, hw), MemorySettings())
    assert plan.kv_bytes_per_token == 70 * 8_192
    assert plan.vllm_num_blocks(KvCacheGroups(1, 6, 10, 1024)) == plan.kv_cache_bytes // (16 * 8_192 * 10) == 15_986
    assert plan.num_blocks == 15_986 // 7
    unified = plan_memory(Deployment(model, hw), MemorySettings(hybrid_kv_cache=False))
    assert unified.kv_bytes_per_token == 62 * 8_192
    assert unified.num_blocks == unified.vllm_num_blocks(KvCacheGroups(1, 0, 62))
    assert unified.num_blocks == plan.kv_cache_bytes // (16 * 62 * 8_192)


def test_a_windowed_model_starts_at_a_context_that_its_full_layers_alone_could_not_hold() -> None:
    """Gemma-3-12b (48 layers, 40 windowed at 1,024; 8 KV heads of 256: 8,192 bytes a token per layer) at
    max_model_len 131,072 on one H100. vLLM 0.15.1 checks group size x page x the first group's blocks for one
    sequence, the first group a windowed one: cdiv(1,023 + 8,192, 16) + 1 = 577 blocks of 8 layers x 16 tokens x
    8,192 bytes, 0.6 GB: it starts. With the hybrid manager off (a KV connector) every layer is full: 131,072
    tokens x 48 x 8,192 bytes = 51.5 GB, more than the 49.9 GB of KV cache."""
    model, hw = load_model("gemma-3-12b-pt"), load_hardware(H100)
    settings = MemorySettings(max_num_batched_tokens=8192, max_model_len=131_072)
    groups = KvCacheGroups.of(model)
    assert groups == KvCacheGroups(1, 5, 8, 1024)
    plan = plan_memory(Deployment(model, hw), settings)
    assert one_sequence_bytes(Deployment(model, hw), settings, groups, plan.kv_bytes_per_token) == 8 * 16 * 8_192 * 577
    assert plan.kv_capacity_tokens < 131_072  # every layer's every token would not fit: the window is what starts it
    with pytest.raises(DoesNotFitError, match=r"max_model_len 131072 needs 51\.5 GB of KV cache per GPU"):
        plan_memory(Deployment(model, hw), replace(settings, hybrid_kv_cache=False))
