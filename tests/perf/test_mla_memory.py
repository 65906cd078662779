"""Memory plan of multi-head latent attention models: the latent is cached whole on every TP rank (vLLM
MLAAttentionSpec), blocks counted by hand, and leading dense layers in a pipeline stage's weights."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ttftsim.config.resolved_engine import mla_block_size
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.iteration import Deployment
from ttftsim.perf.memory import MemorySettings, kv_bytes_per_token_per_gpu, plan_memory, stage_weight_bytes
from ttftsim.replica import build_replica
from ttftsim.simulate import load_scenario, simulate

GIB = 2**30


def test_the_latent_is_not_split_by_tensor_parallelism() -> None:
    """DeepSeek-V3: 61 layers x (512 + 64) x 2 bytes on each of the 8 GPUs; a GQA model's KV is divided."""
    deepseek = Deployment(load_model("DeepSeek-V3"), load_hardware("H200-SXM-141GB"), 8, "fp8", "bf16")
    assert kv_bytes_per_token_per_gpu(deepseek) == 61 * (512 + 64) * 2 == 70_272
    assert kv_bytes_per_token_per_gpu(deepseek, layers=30) == 30 * 576 * 2
    llama = Deployment(load_model("Llama-3.1-70B"), load_hardware("H200-SXM-141GB"), 8)
    assert kv_bytes_per_token_per_gpu(llama) == 327_680 // 8


def test_deepseek_v2_lite_blocks_by_hand() -> None:
    """One H100 (85,520,809,984 bytes), bf16, vLLM defaults: requested ceil(0.9 x memory); weights 2 bytes x
    15,706,484,224 parameters; the profiling pass at 2,048 tokens (2 bytes x (3 x 10,944 dense MLP + 4 x 2,048
    + (16 + 2 x 16) heads x 192)) plus 256 x 102,400 fp32 logits; 0.5 GiB context, no NCCL at TP 1, 0.75 GiB
    of graphs; blocks of 16 tokens x 27 x 576 x 2 bytes."""
    deployment = Deployment(load_model("DeepSeek-V2-Lite"), load_hardware("H100-SXM5-80GB"), 1)
    plan = plan_memory(deployment, MemorySettings())
    requested = math.ceil(85_520_809_984 * 0.9)
    weights = 2 * 15_706_484_224
    activation = 2048 * 2 * (3 * 10944 + 4 * 2048 + (16 + 2 * 16) * 192) + 256 * 102_400 * 4
    kv_cache = requested - weights - activation - GIB // 2 - 3 * GIB // 4
    assert (plan.weight_bytes, plan.activation_bytes, plan.kv_cache_bytes) == (weights, activation, kv_cache)
    assert plan.kv_bytes_per_token == 27 * 576 * 2 == 31_104
    assert plan.num_blocks == kv_cache // (16 * 31_104) == 88_218


def test_deepseek_v3_fits_eight_h200s_in_fp8() -> None:
    deployment = Deployment(load_model("DeepSeek-V3"), load_hardware("H200-SXM-141GB"), 8, "fp8", "bf16")
    plan = plan_memory(deployment, MemorySettings(max_model_len=32_768))
    assert plan.kv_bytes_per_token == 70_272
    assert plan.num_blocks == plan.kv_cache_bytes // (16 * 70_272)
    expert, norms = 3 * 7168 * 2048, 2 * 7168 + 512 + 1536
    linears = 61 * 187_105_280 + 3 * 3 * 7168 * 18432 + 58 * 257 * expert  # fp8: a byte each
    small = 61 * norms + 58 * 7168 * 256 + 2 * 129_280 * 7168 + 7168  # 16-bit
    assert plan.weight_bytes == math.ceil((linears + 2 * small) / 8) == 84_123_399_936


def test_pipeline_stages_weigh_dense_and_moe_layers_apart() -> None:
    """DeepSeek-V3 fp8 on TP 8 x PP 2: layers 31 | 30 (vLLM get_pp_indices); the first stage holds the 3
    dense layers, 28 MoE layers and the input embedding, the second 30 MoE layers, the final norm and LM head."""
    deployment = Deployment(load_model("DeepSeek-V3"), load_hardware("H200-SXM-141GB"), 8, "fp8", "bf16", pp=2)
    assert deployment.stage_layers == (31, 30)
    mla, norms = 187_105_280, 2 * 7168 + 512 + 1536
    dense = (mla + 3 * 7168 * 18432) * 1.0 + norms * 2
    moe = (mla + 257 * 3 * 7168 * 2048) * 1.0 + (norms + 7168 * 256) * 2
    table = 2.0 * 129_280 * 7168
    first, second = 3 * dense + 28 * moe + table, 30 * moe + table + 2.0 * 7168
    assert stage_weight_bytes(deployment) == [math.ceil(first / 8), math.ceil(second / 8)]


@pytest.mark.parametrize(
    ("gpu", "asked", "nope", "runs"),
    [
        ("H100-SXM5-80GB", 16, 128, 64),  # Hopper: FlashMLA needs a multiple of 64 ("Forcing kv cache block size
        ("H200-SXM-141GB", 32, 128, 64),  # to 64 for FlashMLA backend.")
        ("H20-96GB", 128, 128, 128),  # already a multiple of 64: kept
        ("B200-SXM-180GB", 16, 128, 64),  # Blackwell, qk_nope_head_dim 128: FlashInfer MLA (32 or 64k)
        ("GB200-NVL72-186GB", 32, 128, 32),
        ("B200-SXM-180GB", 16, 64, 128),  # Blackwell, another head width: CUTLASS MLA, a multiple of 128
        ("B200-SXM-180GB", 64, 64, 128),
        ("A100-SXM4-80GB", 16, 128, 16),  # no FlashMLA before Hopper: Triton MLA, the size asked for
        ("L40S-48GB", 16, 128, 16),
        ("RTX-PRO-6000-Blackwell-Server-96GB", 16, 128, 16),  # compute capability 12.0: not the 10.x family
        ("MI300X-192GB", 16, 128, 16),  # ROCm: the size asked for (AITER MLA's 1-token kernel pages split it)
    ],
)
def test_mla_runs_with_the_block_size_its_default_backend_needs(gpu: str, asked: int, nope: int, runs: int) -> None:
    assert mla_block_size(asked, load_hardware(gpu), nope) == runs


def test_deepseek_v2_lite_on_an_h100_runs_blocks_of_64_tokens(tmp_path: Path) -> None:
    """The same KV memory as test_deepseek_v2_lite_blocks_by_hand, cut into blocks of 64 tokens; a GQA model on the
    same GPU keeps 16."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        "name: mla\nmodel: DeepSeek-V2-Lite\nhardware: H100-SXM5-80GB\n"
        "workload:\n  type: synthetic\n  arrivals: {type: poisson, rate: 1}\n"
        "  prompt_tokens: {type: fixed, value: 100}\n  output_tokens: {type: fixed, value: 4}\n  num_requests: 2\n"
    )
    summary = simulate(load_scenario(scenario), tmp_path, 0).summary()
    assert summary.config is not None
    assert summary.config.engine["block_size"] == 64
    # vLLM's H100 defaults: the profiling pass at 8,192 tokens, 1,024 sequences' fp32 logits
    activation = 8192 * 2 * (3 * 10944 + 4 * 2048 + (16 + 2 * 16) * 192) + 1024 * 102_400 * 4
    kv_cache = math.ceil(85_520_809_984 * 0.9) - 2 * 15_706_484_224 - activation - GIB // 2 - 3 * GIB // 4
    assert summary.config.num_gpu_blocks == kv_cache // (64 * 31_104) == 21_586
    llama = build_replica(load_scenario(scenario).model_copy(update={"model": "Llama-3.1-8B"}), tmp_path)
    assert llama.engine.block_size == 16


def test_pipeline_stages_split_interleaved_dense_layers_evenly() -> None:
    """Llama 4 Maverick in fp8 on TP 8 x PP 2: layers 24 | 24, each stage 12 dense layers (0, 2, ...) and 12 MoE
    layers (1, 3, ...). A dense layer: attention 62,914,560 + MLP 3 x 5,120 x 16,384 (fp8, a byte each) and two
    norms of 5,120 (16-bit); an MoE layer: attention + 129 experts of 3 x 5,120 x 8,192 (128 routed, 1 shared),
    the norms and a 5,120 x 128 router (16-bit)."""
    deployment = Deployment(load_model("Llama-4-Maverick-17B-128E"), load_hardware("H200-SXM-141GB"), 8, "fp8", pp=2)
    assert deployment.stage_layers == (24, 24)
    attention, norms = 62_914_560, 2 * 5120
    dense = attention + 3 * 5120 * 16_384 + norms * 2
    moe = attention + 129 * 3 * 5120 * 8192 + (norms + 5120 * 128) * 2
    table = 2.0 * 202_048 * 5120
    first, second = 12 * dense + 12 * moe + table, 12 * dense + 12 * moe + table + 2.0 * 5120
    assert stage_weight_bytes(deployment) == [math.ceil(first / 8), math.ceil(second / 8)]
