"""The presets: published parameter counts, hand-computed KV bytes, Hugging Face ids, and what is refused."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from ttftsim.config.dtypes import WeightDtype
from ttftsim.errors import InputError
from ttftsim.model.catalog import closest_presets, load_model, preset_names
from ttftsim.model.hf_ids import name_key
from ttftsim.model.not_modelled import model_warnings
from ttftsim.model.size import active_param_count, kv_bytes_per_token, layer_weight_bytes, param_count, weight_bytes


def _preset(name: str) -> dict[str, Any]:
    text = (resources.files("ttftsim.model") / "presets" / f"{name}.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _write(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_forty_and_more_presets_each_citing_its_source() -> None:
    names = preset_names()
    assert len(names) >= 50
    assert all(_preset(name)["source"] for name in names)


def test_no_two_presets_or_aliases_answer_to_the_same_name() -> None:
    keys = [name_key(name) for preset in preset_names() for name in [preset, *_preset(preset).get("aliases", [])]]
    assert len(keys) == len(set(keys))


def test_presets_md_lists_every_preset() -> None:
    table = (resources.files("ttftsim.model") / "presets" / "PRESETS.md").read_text(encoding="utf-8")
    assert [name for name in preset_names() if f"| {name} |" not in table] == []


@pytest.mark.parametrize(
    ("preset", "published"),
    [  # model cards' totals
        ("Llama-3.1-8B", 8.03e9),
        ("Llama-3.1-70B", 70.6e9),
        ("Llama-3.1-405B", 405.9e9),
        ("Llama-3.2-1B", 1.24e9),
        ("Mixtral-8x7B-v0.1", 46.7e9),
        ("Mixtral-8x22B-v0.1", 140.6e9),
        ("Qwen2.5-7B", 7.61e9),
        ("Qwen2.5-32B", 32.5e9),
        ("Qwen3-8B", 8.2e9),
        ("Qwen3-30B-A3B", 30.5e9),
        ("Qwen3-235B-A22B", 235e9),
        ("gemma-2-9b", 9.24e9),
        ("phi-4", 14.7e9),
        ("gpt-oss-20b", 20.9e9),
        ("gpt-oss-120b", 116.8e9),
        ("Yi-1.5-9B", 8.8e9),
        ("Falcon3-10B-Base", 10.3e9),
        ("c4ai-command-r-v01", 35e9),
        ("c4ai-command-r-plus", 104e9),  # less its q/k norms: 851,968 parameters (PRESETS.md)
        ("Ministral-8B-Instruct-2410", 8_019_808_256),  # the card's exact count, which ours equals
    ],
)
def test_parameter_count_matches_the_published_figure_within_2_percent(preset: str, published: float) -> None:
    assert param_count(load_model(preset)) == pytest.approx(published, rel=0.02)


@pytest.mark.parametrize(
    ("preset", "active"),
    [("Mixtral-8x7B-v0.1", 12.9e9), ("Qwen3-30B-A3B", 3.3e9), ("Qwen3-235B-A22B", 22e9)],
)
def test_active_parameters_of_moe_presets(preset: str, active: float) -> None:
    assert active_param_count(load_model(preset)) == pytest.approx(active, rel=0.02)


@pytest.mark.parametrize(("preset", "active"), [("gpt-oss-20b", 3.6e9), ("gpt-oss-120b", 5.1e9)])
def test_gpt_oss_active_parameters_as_its_card_counts_them(preset: str, active: float) -> None:
    """The card leaves the input embedding (a lookup) out of the active count; ours keeps it."""
    spec = load_model(preset)
    assert active_param_count(spec) - spec.vocab_size * spec.hidden_size == pytest.approx(active, rel=0.02)


@pytest.mark.parametrize(
    ("preset", "layers", "kv_heads", "head_dim"),
    [
        ("Llama-3.1-405B", 126, 8, 128),
        ("Qwen3-30B-A3B", 48, 4, 128),
        ("gpt-oss-120b", 36, 8, 64),
        ("gemma-3-27b-pt", 62, 16, 128),  # head_dim 128 though 5376 / 32 = 168
        ("Mistral-Nemo-Base-2407", 40, 8, 128),  # head_dim 128 though 5120 / 32 = 160
        ("Phi-3-mini-4k-instruct", 32, 32, 96),  # no GQA
        ("gemma-3-1b-pt", 26, 1, 256),  # MQA
        ("c4ai-command-r-v01", 40, 64, 128),  # no GQA: 2 x 40 layers x 64 KV heads x 128 x 2 bytes = 1,310,720
        ("Ministral-8B-Instruct-2410", 36, 8, 128),  # 2 x 36 layers x 8 KV heads x 128 x 2 bytes = 147,456
    ],
)
def test_kv_bytes_per_token_by_hand(preset: str, layers: int, kv_heads: int, head_dim: int) -> None:
    spec = load_model(preset)
    assert kv_bytes_per_token(spec, "bf16") == 2 * layers * kv_heads * head_dim * 2
    assert kv_bytes_per_token(spec, "fp8") == 2 * layers * kv_heads * head_dim * 1


@pytest.mark.parametrize(
    ("model_id", "preset", "dtype"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-8B", "bf16"),
        ("meta-llama/Meta-Llama-3-8B-Instruct", "Meta-Llama-3-8B", "bf16"),
        ("meta-llama/Llama-3.3-70B-Instruct", "Llama-3.3-70B-Instruct", "bf16"),
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen2.5-7B", "bf16"),
        ("Qwen/Qwen3-8B-Base", "Qwen3-8B", "bf16"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B-v0.1", "bf16"),
        ("mistralai/Mistral-Nemo-Instruct-2407", "Mistral-Nemo-Base-2407", "bf16"),
        ("mistralai/Mistral-Small-24B-Instruct-2501", "Mistral-Small-24B-Base-2501", "bf16"),
        ("google/gemma-2-9b-it", "gemma-2-9b", "bf16"),
        ("google/gemma-3-27b-it", "gemma-3-27b-pt", "bf16"),
        ("microsoft/Phi-3-mini-128k-instruct", "Phi-3.5-mini-instruct", "bf16"),  # an alias
        ("01-ai/Yi-1.5-34B-Chat", "Yi-1.5-34B", "bf16"),
        ("Llama-2-7b-chat-hf", "Llama-2-7b-hf", "fp16"),  # no organisation; the checkpoint is fp16
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "Llama-3.1-8B", "fp8"),
        ("RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8-dynamic", "Llama-3.1-70B", "fp8"),
        ("RedHatAI/Mistral-Small-24B-Instruct-2501-FP8-dynamic", "Mistral-Small-24B-Base-2501", "fp8"),
        ("RedHatAI/Llama-3.3-70B-Instruct-quantized.w8a8", "Llama-3.3-70B-Instruct", "int8"),
        ("RedHatAI/Qwen2.5-7B-Instruct-quantized.w4a16", "Qwen2.5-7B", "int4"),
        ("Qwen/Qwen2.5-32B-Instruct-AWQ", "Qwen2.5-32B", "int4"),
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "Qwen2.5-7B", "int4"),
        ("Qwen/Qwen3-30B-A3B-FP8", "Qwen3-30B-A3B", "fp8"),
        ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", "Llama-3.1-70B", "int4"),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "DeepSeek-R1-Distill-Qwen-32B", "bf16"),
        ("openai/gpt-oss-120b", "gpt-oss-120b", "mxfp4"),  # its quantization_config: the experts in MXFP4
        ("CohereForAI/c4ai-command-r-v01", "c4ai-command-r-v01", "fp16"),  # the checkpoint is fp16
        ("CohereLabs/c4ai-command-r-plus", "c4ai-command-r-plus", "bf16"),  # CohereForAI's new name
        ("CohereForAI/c4ai-command-r7b-12-2024", "c4ai-command-r7b-12-2024", "bf16"),
    ],
)
def test_hugging_face_ids_resolve_to_the_preset_and_weight_format(
    model_id: str, preset: str, dtype: WeightDtype
) -> None:
    spec = load_model(model_id)
    assert (spec.name, spec.native_dtype) == (preset, dtype)
    assert param_count(spec) == param_count(load_model(preset))


def test_an_unknown_id_is_one_line_naming_the_field_the_closest_presets_and_config_json() -> None:
    with pytest.raises(InputError) as info:
        load_model("meta-llama/Llama-3.1-9B-Instruct", "scenario.yaml")
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith("scenario.yaml: model: unknown model 'meta-llama/Llama-3.1-9B-Instruct'")
    assert "closest presets: Llama-3.1-8B" in line
    assert "config.json" in line
    assert closest_presets("Qwen2.5-7B-Instruct-1M")[0] == "Qwen2.5-7B"


def test_an_unknown_name_with_nothing_near_points_at_the_list() -> None:
    with pytest.raises(InputError, match="`ttftsim models` lists the presets"):
        load_model("acme/Frontier-9000")


@pytest.mark.parametrize("model_id", ["nvidia/Llama-3.1-8B-Instruct-NVFP4", "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8"])
def test_a_quantization_format_without_a_weight_dtype_is_refused(model_id: str) -> None:
    with pytest.raises(InputError, match=r"model: unmodelled weight format '.+' of .+ name a modelled checkpoint"):
        load_model(model_id)


def test_the_suffix_dtype_is_what_the_engine_serves_by_default() -> None:
    from ttftsim.config.engine import EngineArgs
    from ttftsim.config.resolved_engine import resolve_engine
    from ttftsim.hardware.catalog import load_hardware

    spec = load_model("nvidia/Llama-3.1-8B-Instruct-FP8")
    hardware = load_hardware("H100-SXM5-80GB")
    assert resolve_engine(EngineArgs(), hardware, 8192, spec.native_dtype).weight_dtype == "fp8"
    assert resolve_engine(EngineArgs(quantization="int4"), hardware, 8192, spec.native_dtype).weight_dtype == "int4"


@pytest.mark.parametrize(
    ("field", "config"),
    [
        ("moe_layer_freq", {"model_type": "deepseek_v2", "kv_lora_rank": 512, "moe_layer_freq": 2}),
        ("mlp_only_layers", {"model_type": "qwen3_moe", "mlp_only_layers": [0, 1]}),
        ("interleave_moe_layer_step", {"model_type": "llama4_text", "interleave_moe_layer_step": 0}),  # all dense
        ("layer_types", {"model_type": "qwen3_next", "layer_types": ["linear_attention", "full_attention"]}),
        ("layers_block_type", {"model_type": "nemotron_h", "layers_block_type": ["mamba", "attention"]}),
    ],
)
def test_architectures_the_spec_cannot_express_are_refused_with_the_field(
    tmp_path: Path, field: str, config: dict[str, Any]
) -> None:
    with pytest.raises(InputError) as info:
        load_model(str(_write(tmp_path, config)))
    assert f": {field}: " in str(info.value) and "cannot be sized" in str(info.value)


def test_a_qwen3_moe_config_json_reads_num_experts_and_moe_intermediate_size(tmp_path: Path) -> None:
    preset = _preset("Qwen3-30B-A3B")
    hf = {k: v for k, v in preset.items() if k not in ("num_local_experts", "intermediate_size", "source")}
    hf |= {"num_experts": 128, "moe_intermediate_size": 768, "intermediate_size": 6144, "mlp_only_layers": []}
    spec = load_model(str(_write(tmp_path, hf)))
    assert (spec.num_local_experts, spec.intermediate_size) == (128, 768)
    assert param_count(spec) == param_count(load_model("Qwen3-30B-A3B"))


def test_a_multimodal_config_json_is_read_as_its_language_model(tmp_path: Path) -> None:
    text = {k: v for k, v in _preset("gemma-3-27b-pt").items() if k not in ("source", "num_sliding_window_layers")}
    wrapped = {"model_type": "gemma3", "torch_dtype": "bfloat16", "text_config": text | {"sliding_window_pattern": 6}}
    spec = load_model(str(_write(tmp_path, wrapped)))
    assert spec.model_type == "gemma3_text" and spec.num_sliding_window_layers == 62 - 10
    assert param_count(spec) == param_count(load_model("gemma-3-27b-pt"))


@pytest.mark.parametrize(
    ("fields", "layers"),
    [
        ({"model_type": "gemma2", "num_hidden_layers": 42, "sliding_window": 4096}, 21),  # every other layer
        (
            {"model_type": "gemma3_text", "num_hidden_layers": 26, "sliding_window": 512, "sliding_window_pattern": 6},
            22,
        ),
        ({"layer_types": ["sliding_attention", "full_attention"] * 18, "sliding_window": 128}, 18),
        ({"model_type": "mistral", "sliding_window": 4096}, None),  # every layer
    ],
)
def test_how_many_layers_use_the_window(tmp_path: Path, fields: dict[str, Any], layers: int | None) -> None:
    base = {k: v for k, v in _preset("gemma-2-9b").items() if k not in ("num_sliding_window_layers", "source")}
    if "layer_types" in fields:
        base |= {"model_type": "gpt_oss", "num_hidden_layers": 36}
    assert load_model(str(_write(tmp_path, base | fields))).num_sliding_window_layers == layers


def test_warnings_name_the_windowed_layers_and_the_closest_format_of_a_quant_method_not_modelled() -> None:
    gemma = load_model("gemma-2-9b")
    (window,) = model_warnings(gemma, 8192, "bf16", window_kept=True)
    assert window.startswith("sliding_window=4096 (gemma-2-9b, 21 of 42 layers) is modelled in attention time but not")
    gpt_oss = load_model("openai/gpt-oss-120b")  # its window is freed as vLLM frees it, its MXFP4 modelled
    assert model_warnings(gpt_oss, 131072, "mxfp4") == []
    awq = load_model("Qwen2.5-7B").model_copy(update={"quantization_method": "awq"})
    (warning,) = model_warnings(awq, 32768, "bf16")
    assert "quant_method awq" in warning and "quantization: int4" in warning
    assert model_warnings(awq, 32768, "int4") == []


def test_mxfp4_quantizes_the_routed_experts_alone() -> None:
    """gpt-oss's checkpoints: 128 (32) experts a layer of 3 x 2880 x 2880 weights and 8,640 biases at 4.25 bits,
    everything else in bf16: 65.2 GB and 13.8 GB, as published (60.8 and 12.8 GiB); a dense model in MXFP4 is
    its bf16 self (vLLM's Mxfp4Config quantizes FusedMoE layers alone)."""
    big, small = load_model("gpt-oss-120b"), load_model("gpt-oss-20b")
    routed = 36 * 128 * 24_891_840
    assert weight_bytes(big, "mxfp4") == routed * 4.25 / 8 + (param_count(big) - routed) * 2
    assert round(weight_bytes(big, "mxfp4") / 1e9, 1) == 65.2 and round(weight_bytes(small, "mxfp4") / 1e9, 1) == 13.8
    dense, moe = layer_weight_bytes(big, "mxfp4")
    assert dense == layer_weight_bytes(big, "bf16")[0] and moe == layer_weight_bytes(big, "bf16")[
        1
    ] - 128 * 24_891_840 * (2 - 4.25 / 8)
    llama = load_model("Llama-3.1-8B")
    assert weight_bytes(llama, "mxfp4") == weight_bytes(llama, "bf16")


def test_command_r7b_holds_its_module_shapes_and_windows_three_layers_in_four() -> None:
    """The card's "7B" is a name: embedding 256000 x 4096 (tied), per layer q and o 4096 x 4096, k and v 1024 x
    4096, gate/up/down 14336 x 4096 and one LayerNorm of 4096, and a final LayerNorm hold 8.03B."""
    spec = load_model("CohereForAI/c4ai-command-r7b-12-2024")
    layer = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 4096
    assert param_count(spec) == 256000 * 4096 + 32 * layer + 4096
    assert (spec.sliding_window, spec.num_sliding_window_layers) == (4096, 24)
    assert kv_bytes_per_token(spec, "bf16") == 2 * 32 * 8 * 128 * 2  # every layer, windowed ones too


def test_a_cohere_config_json_reads_model_max_length_tied_embeddings_and_the_window_pattern(tmp_path: Path) -> None:
    """As published: max_position_embeddings 8192 beside model_max_length 131072 (vLLM serves the latter),
    tie_word_embeddings left to transformers' default (True), Command R7B's window as sliding_window_pattern."""
    drop = ("source", "tie_word_embeddings", "max_position_embeddings", "num_sliding_window_layers")
    v01 = {k: v for k, v in _preset("c4ai-command-r-v01").items() if k not in drop}
    v01 |= {"max_position_embeddings": 8192, "model_max_length": 131072, "use_qk_norm": False}
    spec = load_model(str(_write(tmp_path, v01)))
    assert (spec.max_position_embeddings, spec.tie_word_embeddings) == (131072, True)
    assert param_count(spec) == param_count(load_model("c4ai-command-r-v01"))
    r7b = {k: v for k, v in _preset("c4ai-command-r7b-12-2024").items() if k not in drop}
    r7b |= {"max_position_embeddings": 132096, "sliding_window_pattern": 4}
    assert load_model(str(_write(tmp_path, r7b))).num_sliding_window_layers == 24


@pytest.mark.parametrize(
    ("model", "positions"),
    [
        ("Qwen/Qwen2.5-7B", 131072),
        ("Qwen/Qwen2.5-7B-Instruct", 32768),  # its config.json; 131072 only with YaRN rope_scaling added
        ("Qwen/Qwen2.5-72B-Instruct-AWQ", 32768),
        ("Qwen/Qwen2.5-14B-Instruct", 32768),
        ("Qwen/Qwen2.5-3B-Instruct", 32768),  # base and Instruct alike
        ("meta-llama/Llama-3.1-8B-Instruct", 131072),
    ],
)
def test_an_instruct_checkpoint_with_its_own_context_gets_it(model: str, positions: int) -> None:
    from ttftsim.model.catalog import load_model

    assert load_model(model).max_position_embeddings == positions
