"""Iteration time of DeepSeek-class models: MLA prefill over the up-projected latent, MLA decode over the
cached latent with absorbed projections, shared experts as an always-active dense MLP, leading dense layers.
Each checked against a number worked by hand."""

from __future__ import annotations

import pytest

from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.model.size import active_param_count, embedding_params
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.flops import prefill_flops
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.kernels import RooflineCosts
from ttftsim.perf.mla import MlaLayer


def _model(name: str, tp: int = 1, kv: str = "bf16") -> IterationModel:
    return IterationModel(Deployment(load_model(name), load_hardware("H100-SXM5-80GB"), tp, "bf16", kv))  # type: ignore[arg-type]


def test_mla_shapes_of_deepseek_v3_on_eight_gpus() -> None:
    """16 heads per GPU; prefill: q/k 128 + 64, v 128, K and V per head in 16 bits; decode: one latent of
    512 + 64 read once per token (576 bytes in fp8), values of 512."""
    layer = MlaLayer.of(load_model("DeepSeek-V3"), 8)
    prefill, decode = layer.prefill_shape(), layer.decode_shape(1)
    assert (prefill.q_heads, prefill.kv_heads, prefill.head_dim, prefill.value_dim) == (16, 16, 192, 128)
    assert prefill.pair_width == 16 * 320 and prefill.kv_bytes_per_token == 16 * 320 * 2
    assert (decode.q_heads, decode.kv_heads, decode.head_dim, decode.value_dim) == (16, 1, 576, 512)
    assert decode.pair_width == 16 * 1088 and decode.kv_bytes_per_token == 576


def test_mla_decode_reads_the_latent_once_and_runs_the_absorbed_projections() -> None:
    """DeepSeek-V2-Lite, one H100, 64 decodes over 64,000 cached tokens. Per layer: attention reads 64,000 x
    576 x 2 bytes of latent and the query/output of 64 x 16 x 1,088 x 2 bytes (75,956,224 bytes: 28.8 us at 88%
    of 3.35 TB/s after the 3 us of a 9 MB half-efficiency size; its 2 x 16 x 1,088 x 64,000 = 2.23 GFLOP take
    4.5 us at half of 989 TFLOP/s); the absorbed
    W_UK, W_UV are one 16-bit GEMM of 64 rows x 16 x (128 + 128) x 512."""
    model = _model("DeepSeek-V2-Lite")
    roof = RooflineCosts(model.deployment.hardware)
    shape = BatchShape(num_decode_seqs=64, decode_kv_tokens=64_000, num_sampled=64)
    moved = 64_000 * 576 * 2 + 2.0 * 64 * 16 * 1088
    assert roof.memory_s(moved) > 2.0 * 16 * 1088 * 64_000 / (989e12 * 0.5)
    absorbed = roof.gemm_s(64, 16 * 256, 512, "bf16", 16 * 256 * 512 * 2.0)
    assert model.timing(shape).breakdown["decode_attention"] == pytest.approx(27 * (roof.memory_s(moved) + absorbed))
    assert roof.memory_s(moved) == pytest.approx(9e6 / (3.35e12 * 0.88) + 75_956_224 / (3.35e12 * 0.88))


def test_fp8_kv_halves_the_latent_read() -> None:
    shape = BatchShape(num_decode_seqs=8, decode_kv_tokens=800_000, num_sampled=8)
    bf16 = _model("DeepSeek-V2-Lite").timing(shape).breakdown["decode_attention"]
    fp8 = _model("DeepSeek-V2-Lite", kv="fp8").timing(shape).breakdown["decode_attention"]
    assert fp8 / bf16 == pytest.approx(0.5, abs=0.02)


def test_mla_prefill_is_multi_head_attention_after_the_up_projection() -> None:
    """2,048 new tokens after 1,000 cached ones: 2,048 x 1,000 + 2,048 x 2,049 / 2 = 4,146,176 query-key
    pairs, 2 x 16 heads x (192 + 128) FLOPs each per layer: 42.5 GFLOP, compute-bound at half of 989 TFLOP/s
    (85.9 us); kv_b_proj up-projects the 3,048 tokens' latents (3,048 x 16 x 256 x 512)."""
    model = _model("DeepSeek-V2-Lite")
    roof = RooflineCosts(model.deployment.hardware)
    pairs = 2048 * 1000 + 2048 * 2049 // 2
    shape = BatchShape(1, 2048, pairs, 3048, num_sampled=1)
    flops = 2.0 * 16 * 320 * pairs
    assert flops == 42_456_842_240
    up = roof.gemm_s(3048, 16 * 256, 512, "bf16", 16 * 256 * 512 * 2.0)
    assert model.timing(shape).breakdown["prefill_attention"] == pytest.approx(27 * (flops / (989e12 * 0.5) + up))


def test_mla_projections_by_hand() -> None:
    """DeepSeek-V3 on 8 GPUs, fp8 weights: q_a + kv_a replicated (7,168 -> 1,536 + 576), q_b over 16 heads
    (1,536 -> 16 x 192), o_proj 16 x 128 -> 7,168, for 61 layers."""
    model = IterationModel(Deployment(load_model("DeepSeek-V3"), load_hardware("H200-SXM-141GB"), 8, "fp8", "bf16"))
    roof = RooflineCosts(model.deployment.hardware)
    parts = model.timing(BatchShape(1, 512, 512 * 513 // 2, 512, num_sampled=1)).breakdown
    down = roof.gemm_s(512, 1536 + 576, 7168, "fp8", 2112 * 7168 * 1.0)
    q_up = roof.gemm_s(512, 16 * 192, 1536, "fp8", 3072 * 1536 * 1.0)
    assert parts["qkv_proj"] == pytest.approx(61 * (down + q_up))
    assert parts["o_proj"] == pytest.approx(61 * roof.gemm_s(512, 7168, 2048, "fp8", 7168 * 2048 * 1.0))


def test_shared_expert_is_an_always_active_dense_mlp_behind_its_gate() -> None:
    """Qwen1.5-MoE-A2.7B: on each of 24 layers the shared expert (2,048 -> 2 x 5,632 -> 2,048), its SiLU-mul
    (6 bytes x 5,632 per token) and its sigmoid gate (2,048 -> 1), beside the routed experts."""
    model = _model("Qwen1.5-MoE-A2.7B")
    roof = RooflineCosts(model.deployment.hardware)
    tokens = 256
    shared = (
        roof.gemm_s(tokens, 2 * 5632, 2048, "bf16", 2 * 5632 * 2048 * 2.0)
        + roof.gemm_s(tokens, 2048, 5632, "bf16", 5632 * 2048 * 2.0)
        + roof.memory_s(6.0 * tokens * 5632)
        + roof.gemm_s(tokens, 1, 2048, "bf16", 2048 * 2.0)
    )
    parts = model.timing(BatchShape(1, tokens, tokens * (tokens + 1) // 2, tokens, num_sampled=1)).breakdown
    assert parts["shared_experts"] == pytest.approx(24 * shared)
    assert "mlp" not in parts  # no dense layers


def test_leading_dense_layers_run_the_dense_width() -> None:
    """DeepSeek-V2-Lite: layer 0's MLP is 2,048 -> 2 x 10,944 -> 2,048; the other 26 are MoE layers with two
    shared experts of 1,408 (2,816 together)."""
    model = _model("DeepSeek-V2-Lite")
    tokens = 512
    parts = model.timing(BatchShape(1, tokens, tokens * (tokens + 1) // 2, tokens, num_sampled=1)).breakdown
    roof = RooflineCosts(model.deployment.hardware)
    assert parts["mlp"] == pytest.approx(1 * _gated_mlp_s(roof, tokens, 2048, 10944))
    assert parts["shared_experts"] == pytest.approx(26 * _gated_mlp_s(roof, tokens, 2048, 2816))
    routed = _model("DeepSeek-V2-Lite")._ffn.layer_s(tokens)
    assert parts["moe"] == pytest.approx(26 * routed)


def test_interleaved_dense_layers_run_the_dense_width_between_the_moe_ones() -> None:
    """Llama 4 Maverick (hidden 5,120): 24 dense layers of 5,120 -> 2 x 16,384 -> 5,120 and 24 MoE layers, each
    with a shared expert of 8,192; Scout (every layer MoE) has no dense MLP and 48 shared experts."""
    model = _model("Llama-4-Maverick-17B-128E")
    tokens = 512
    shape = BatchShape(1, tokens, tokens * (tokens + 1) // 2, tokens, num_sampled=1)
    parts = model.timing(shape).breakdown
    roof = RooflineCosts(model.deployment.hardware)
    assert parts["mlp"] == pytest.approx(24 * _gated_mlp_s(roof, tokens, 5120, 16384))
    assert parts["shared_experts"] == pytest.approx(24 * _gated_mlp_s(roof, tokens, 5120, 8192))
    assert parts["moe"] == pytest.approx(24 * model._ffn.layer_s(tokens))
    scout = _model("Llama-4-Scout-17B-16E").timing(shape).breakdown
    assert "mlp" not in scout and scout["shared_experts"] == pytest.approx(48 * _gated_mlp_s(roof, tokens, 5120, 8192))


def _gated_mlp_s(roof: RooflineCosts, tokens: int, hidden: int, inter: int) -> float:
    """A gated MLP by hand: gate-up GEMM (hidden -> 2 x inter), down GEMM, the SiLU-mul's 6 bytes per element."""
    return (
        roof.gemm_s(tokens, 2 * inter, hidden, "bf16", 2 * inter * hidden * 2.0)
        + roof.gemm_s(tokens, hidden, inter, "bf16", inter * hidden * 2.0)
        + roof.memory_s(6.0 * tokens * inter)
    )


def test_decode_fast_paths_equal_the_step_time_for_mla() -> None:
    model = _model("DeepSeek-V2-Lite")
    shape = BatchShape(num_decode_seqs=32, decode_kv_tokens=32 * 700, num_sampled=32)
    assert model.decode_step_s(32)(32 * 700) == model.time_s(shape)
    run = model.decode_run_s(32, 32 * 700, 3)
    later = BatchShape(num_decode_seqs=32, decode_kv_tokens=32 * 702, num_sampled=32)
    assert (run[0], run[2]) == (model.time_s(shape), model.time_s(later))


def test_mla_prefill_flops_by_hand() -> None:
    """DeepSeek-V3, 1,000 tokens after 500 cached: 2 x active body parameters per token, attention
    2 x 61 x 128 x 320 x (1,000 x 500 + 1,000 x 1,001 / 2) pairs, the 500 cached latents up-projected
    (2 x 61 x 512 x 128 x 256 x 500), the LM head for one token."""
    spec = load_model("DeepSeek-V3")
    body = active_param_count(spec) - embedding_params(spec)
    pairs = 1000 * 500 + 1000 * 1001 // 2
    by_hand = 2.0 * body * 1000 + 2.0 * 61 * 128 * 320 * pairs + 2.0 * 61 * 512 * 128 * 256 * 500 + 2.0 * 7168 * 129280
    assert prefill_flops(spec, 1000, 500) == by_hand
    assert by_hand == pytest.approx(7.6e13, rel=0.02)
