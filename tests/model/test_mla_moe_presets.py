"""DeepSeek-class models (multi-head latent attention, shared experts, leading dense layers) and Qwen2-MoE:
published parameter counts, MLA KV bytes by hand, and how their config.json fields are read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.model.test_presets import _preset, _write
from ttftsim.errors import InputError
from ttftsim.explain import kv_bytes
from ttftsim.model.catalog import load_model
from ttftsim.model.not_modelled import model_warnings
from ttftsim.model.size import active_param_count, kv_bytes_per_token, layer_params, param_count, weight_bytes


@pytest.mark.parametrize(
    ("preset", "published"),
    [  # model cards' totals
        ("DeepSeek-V3", 671e9),
        ("DeepSeek-R1", 671e9),
        ("DeepSeek-V2", 236e9),
        ("DeepSeek-V2-Lite", 15.7e9),
        ("Qwen1.5-MoE-A2.7B", 14.3e9),
        ("Qwen2-57B-A14B", 57.4e9),  # the Hugging Face listing's 57.4B; the card rounds to 57B
    ],
)
def test_total_parameters_match_the_published_figure_within_1_percent(preset: str, published: float) -> None:
    assert param_count(load_model(preset)) == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize(
    ("preset", "active", "within"),
    [
        # DeepSeek's README_WEIGHTS.md: 36.6B activated "including 0.9B for the output Head" (no input embedding)
        ("DeepSeek-V3", 36.6e9, 0.05e9),
        ("DeepSeek-V2", 21e9, 0.5e9),  # "21B activated": two significant figures
        ("DeepSeek-V2-Lite", 2.4e9, 0.06e9),  # "2.4B activated"; 2.454B here, which the card writes as 2.4B
    ],
)
def test_deepseek_active_parameters_as_the_cards_count_them(preset: str, active: float, within: float) -> None:
    """Top-k of the routed experts, the shared experts and the dense layers in full, the LM head; the input
    embedding (a lookup) left out as DeepSeek counts."""
    spec = load_model(preset)
    assert active_param_count(spec) - spec.vocab_size * spec.hidden_size == pytest.approx(active, abs=within)


def test_qwen_moe_active_parameters() -> None:
    assert active_param_count(load_model("Qwen1.5-MoE-A2.7B")) == pytest.approx(2.7e9, abs=0.05e9)
    assert active_param_count(load_model("Qwen2-57B-A14B")) == pytest.approx(14e9, abs=0.5e9)


def test_deepseek_v3_layer_by_hand() -> None:
    """One MLA layer of DeepSeek-V3: q_a 7168x1536 + q_b 1536x(128x192) + kv_a 7168x(512+64) + kv_b
    512x(128x(128+128)) + o 128x128x7168; an expert 3x7168x2048; the dense layers' MLP 3x7168x18432."""
    layer = layer_params(load_model("DeepSeek-V3"))
    mla = 7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168
    assert layer.attention == mla == 187_105_280
    assert (layer.expert, layer.shared_expert, layer.dense_mlp) == (3 * 7168 * 2048, 3 * 7168 * 2048, 3 * 7168 * 18432)
    assert layer.router == 7168 * 256 and layer.norms == 2 * 7168 + 512 + 1536


def test_deepseek_v3_total_by_hand() -> None:
    """61 MLA layers, 3 dense MLPs, 58 MoE layers of 256 routed + 1 shared expert and a router, 61 x (two
    RMSNorms + the q and kv latent norms), untied embedding and LM head, the final norm."""
    spec = load_model("DeepSeek-V3")
    expert = 3 * 7168 * 2048
    by_hand = (
        61 * 187_105_280
        + 3 * 3 * 7168 * 18432
        + 58 * (257 * expert + 7168 * 256)
        + 61 * (2 * 7168 + 512 + 1536)
        + 2 * 129280 * 7168
        + 7168
    )
    assert param_count(spec) == by_hand == 671_026_404_352


def test_mla_kv_bytes_per_token_by_hand() -> None:
    """One latent of kv_lora_rank + qk_rope_head_dim per layer, no separate K and V, no heads."""
    assert kv_bytes_per_token(load_model("DeepSeek-V3"), "bf16") == 61 * (512 + 64) * 2 == 70_272
    assert kv_bytes_per_token(load_model("DeepSeek-V3"), "fp8") == 61 * (512 + 64)
    assert kv_bytes_per_token(load_model("DeepSeek-V2-Lite"), "bf16") == 27 * 576 * 2
    assert kv_bytes_per_token(load_model("Kimi-K2-Instruct"), "bf16") == 61 * 576 * 2


def test_qwen2_moe_kv_bytes_are_gqa() -> None:
    assert kv_bytes_per_token(load_model("Qwen2-57B-A14B"), "bf16") == 2 * 28 * 4 * 128 * 2


def test_deepseek_v3_is_an_fp8_checkpoint_without_a_warning() -> None:
    spec = load_model("deepseek-ai/DeepSeek-V3")
    assert spec.native_dtype == "fp8" and spec.quantization_method is None
    assert model_warnings(spec, 8192, "fp8") == []
    expert = 3 * 7168 * 2048
    linears = 61 * 187_105_280 + 3 * 3 * 7168 * 18432 + 58 * 257 * expert
    small = 61 * (2 * 7168 + 512 + 1536) + 58 * 7168 * 256 + 2 * 129280 * 7168 + 7168
    assert weight_bytes(spec, "fp8") == linears * 1.0 + small * 2.0


@pytest.mark.parametrize(
    ("model_id", "preset"),
    [
        ("deepseek-ai/DeepSeek-V2-Lite-Chat", "DeepSeek-V2-Lite"),
        ("deepseek-ai/DeepSeek-V3-0324", "DeepSeek-V3"),
        ("deepseek-ai/DeepSeek-R1-0528", "DeepSeek-R1"),
        ("moonshotai/Kimi-K2-Instruct", "Kimi-K2-Instruct"),
        ("Qwen/Qwen1.5-MoE-A2.7B-Chat", "Qwen1.5-MoE-A2.7B"),
        ("Qwen/Qwen2-57B-A14B-Instruct", "Qwen2-57B-A14B"),
    ],
)
def test_hugging_face_ids_resolve(model_id: str, preset: str) -> None:
    assert load_model(model_id).name == preset


def test_a_deepseek_config_json_reads_like_the_preset(tmp_path: Path) -> None:
    """n_routed_experts, moe_intermediate_size over intermediate_size, n_shared_experts x the expert width,
    first_k_dense_replace with the dense width, head_dim as nope + rope, q_lora_rank null."""
    config = {k: v for k, v in _preset("DeepSeek-V2-Lite").items() if k not in ("source", "aliases")}
    spec = load_model(str(_write(tmp_path, config)))
    assert (spec.num_local_experts, spec.intermediate_size, spec.shared_expert_intermediate_size) == (64, 1408, 2816)
    assert (spec.num_dense_layers, spec.dense_intermediate_size, spec.num_moe_layers) == (1, 10944, 26)
    assert (spec.head_dim, spec.q_lora_rank, spec.kv_lora_rank, spec.is_mla) == (192, None, 512, True)
    assert param_count(spec) == param_count(load_model("DeepSeek-V2-Lite"))


def test_a_qwen2_moe_config_reads_the_shared_expert_and_its_gate() -> None:
    spec = load_model("Qwen1.5-MoE-A2.7B")
    assert (spec.shared_expert_intermediate_size, spec.shared_expert_gate, spec.num_dense_layers) == (5632, True, 0)
    layer = layer_params(spec)
    assert layer.shared_gate == 2048 and layer.shared_expert == 3 * 2048 * 5632


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"qk_rope_head_dim": 0}, "kv_lora_rank"),  # MLA without its head widths
        ({"first_k_dense_replace": 40}, "num_dense_layers"),  # more dense layers than layers
        ({"num_hidden_layers": "many"}, "num_hidden_layers"),
    ],
)
def test_a_broken_mla_config_is_one_line_naming_the_file(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    config = {k: v for k, v in _preset("DeepSeek-V2-Lite").items() if k not in ("source", "aliases")} | change
    path = _write(tmp_path, config)
    with pytest.raises(InputError) as info:
        load_model(str(path))
    message = str(info.value)
    assert str(path) in message and field in message and "\n" not in message


def test_llama4_scout_text_model() -> None:
    """48 layers of GQA (40/8 heads of 128) with a top-1 of 16 experts and one shared expert, both 8,192 wide,
    on every layer. Active: attention 5,120 x 128 x (40 + 2 x 8 + 40) + 2 experts' worth of MLP per layer, the
    embedding and LM head: 17.17B against the card's 17B. Total 107.77B: the card's 109B counts the vision
    encoder too (34 layers of width 1,408, about 0.9B), which is not modelled."""
    spec = load_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    attention, mlp = 5120 * 128 * (40 + 16 + 40), 3 * 5120 * 8192
    embedding, router, norms = 2 * 202_048 * 5120 + 5120, 5120 * 16, 2 * 5120
    assert active_param_count(spec) == 48 * (attention + 2 * mlp + router + norms) + embedding
    assert active_param_count(spec) == pytest.approx(17e9, rel=0.011)
    assert param_count(spec) == 48 * (attention + 17 * mlp + router + norms) + embedding
    assert param_count(spec) == pytest.approx(109e9 - 0.9e9, rel=0.01)
    assert kv_bytes_per_token(spec, "bf16") == 2 * 48 * 8 * 128 * 2


def test_llama4_chunked_attention_is_read_and_warned() -> None:
    spec = load_model("Llama-4-Scout-17B-16E")
    (warning,) = model_warnings(spec, 131_072, "bf16")
    assert warning.startswith("attention_chunk_size=8192 (Llama-4-Scout-17B-16E, 36 of 48 layers) is parsed")
    assert model_warnings(spec, 8192, "bf16") == []  # contexts within one chunk: exact


def test_llama4_maverick_is_moe_on_every_second_layer_and_dense_between() -> None:
    """vLLM 0.15.1 llama4.py Llama4DecoderLayer: MoE where (layer + 1) % interleave_moe_layer_step == 0, else a
    LlamaMLP of intermediate_size_mlp. Maverick (48 layers, step 2): 24 MoE layers of 128 experts of 8,192 with a
    shared expert of 8,192, and 24 dense MLPs of 16,384. By hand, hidden 5,120: attention 2 x 5,120^2 + 2 x 5,120 x
    1,024 = 62,914,560 a layer; an expert or the shared one 3 x 5,120 x 8,192 = 125,829,120; a dense MLP 3 x 5,120
    x 16,384 = 251,658,240; router 5,120 x 128; norms 2 x 5,120 a layer; embeddings 2 x 202,048 x 5,120 and the
    final norm."""
    spec = load_model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert (spec.moe_layer_step, spec.num_moe_layers, spec.num_dense_mlp_layers) == (2, 24, 24)
    assert spec.dense_intermediate_size == 16_384 and spec.shared_expert_intermediate_size == 8_192
    expected = (
        48 * (62_914_560 + 2 * 5_120)
        + 24 * (129 * 125_829_120 + 5_120 * 128)
        + 24 * 251_658_240
        + 2 * 202_048 * 5_120
        + 5_120
    )
    assert param_count(spec) == expected
    assert abs(param_count(spec) / 400e9 - 1) < 0.01  # model card: 400B total (text and vision)
    active = expected - 24 * 127 * 125_829_120  # one routed expert a token
    assert active_param_count(spec) == active and abs(active / 17e9 - 1) < 0.02  # model card: 17B active
    # layers 0..23 hold MoE layers 1, 3, ..., 23; a stage of layers 5..9: 5, 7, 9
    assert (spec.num_moe_layers_in(0, 24), spec.num_moe_layers_in(5, 5), spec.num_moe_layers_in(0, 1)) == (12, 3, 0)


def test_qwen2_moe_decoder_sparse_step_is_the_same_rule_and_moe_layer_freq_is_refused(tmp_path: Path) -> None:
    """Qwen2-MoE (qwen2_moe.py Qwen2MoeDecoderLayer): MoE where (layer + 1) % decoder_sparse_step == 0, the
    others a dense MLP of the config's intermediate_size. DeepSeek-V2's moe_layer_freq counts from the first
    dense layer instead: refused."""
    config = {k: v for k, v in _preset("Qwen1.5-MoE-A2.7B").items() if k not in ("source", "aliases")}
    spec = load_model(str(_write(tmp_path, config | {"decoder_sparse_step": 3})))
    assert (spec.moe_layer_step, spec.num_moe_layers) == (3, spec.num_hidden_layers // 3)
    assert spec.num_dense_mlp_layers == spec.num_hidden_layers - spec.num_hidden_layers // 3
    with pytest.raises(InputError, match="moe_layer_freq: MoE on every 2th layer counted from the first dense one"):
        load_model(str(_write(tmp_path, config | {"moe_layer_freq": 2})))


def test_explain_kv_states_the_mla_formula() -> None:
    result = kv_bytes("DeepSeek-V3", "bf16", 1000)
    assert result["formula"].startswith("61 layers x (512 kv_lora_rank + 64 qk_rope_head_dim) x 2 bytes")
    assert (result["bytes_per_token"], result["total_bytes"]) == (70_272, 70_272_000)
