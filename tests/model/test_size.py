"""Known answers for model sizes (seed-claims.md 'arithmetic the articles get wrong')."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttftsim.errors import InputError
from ttftsim.model.catalog import load_model, preset_names
from ttftsim.model.size import active_param_count, kv_bytes_per_token, param_count, weight_bytes


def test_llama3_70b_kv_bytes_per_token_is_320_kib_in_bf16() -> None:
    spec = load_model("Llama-3.1-70B")
    assert kv_bytes_per_token(spec, "bf16") == 327_680
    assert kv_bytes_per_token(spec, "fp8") == 163_840
    assert spec.hidden_size == 8192


def test_llama3_70b_has_about_70_6e9_parameters() -> None:
    assert param_count(load_model("meta-llama/Llama-3.1-70B-Instruct")) == pytest.approx(70.6e9, rel=0.005)


def test_mixtral_total_and_active_parameters() -> None:
    spec = load_model("Mixtral-8x7B-v0.1")
    assert param_count(spec) == pytest.approx(46.7e9, rel=0.005)
    assert active_param_count(spec) == pytest.approx(12.9e9, rel=0.01)


def test_weight_bytes_by_dtype() -> None:
    spec = load_model("Llama-3.1-8B")
    bf16 = weight_bytes(spec, "bf16")
    assert bf16 == pytest.approx(2 * param_count(spec))
    # fp8 halves the block linears only; embeddings stay 16-bit
    assert weight_bytes(spec, "fp8") < 0.6 * bf16
    int4 = weight_bytes(spec, "int4")
    linear = param_count(spec) - 2 * spec.vocab_size * spec.hidden_size
    assert int4 == pytest.approx(bf16 - linear * (2 - 0.5 - 2 / 128), rel=1e-3)


def test_gqa_llama2_7b_has_no_kv_sharing() -> None:
    spec = load_model("Llama-2-7b-hf")
    assert kv_bytes_per_token(spec, "bf16") == 2 * 32 * 32 * 128 * 2


def test_every_preset_loads() -> None:
    names = preset_names()
    assert {"Llama-3.1-70B", "Mixtral-8x7B-v0.1", "Mistral-7B-v0.1", "Qwen2.5-7B", "Qwen2.5-72B"} <= set(names)
    for name in names:
        assert param_count(load_model(name)) > 4e8  # the smallest: Qwen2.5-0.5B


def test_config_json_path_and_matches_shared_file(shared: Path) -> None:
    for path in sorted((shared / "data" / "models").glob("*.json")):
        spec = load_model(str(path))
        preset = load_model(path.stem)
        assert param_count(spec) == param_count(preset), path.name


def test_bad_config_json_names_file_and_field(tmp_path: Path) -> None:
    config = {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": -1,
        "num_hidden_layers": 2,
        "num_attention_heads": 32,
        "vocab_size": 1000,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(InputError) as info:
        load_model(str(path))
    assert str(path) in str(info.value)
    assert "intermediate_size" in str(info.value)


def test_heads_not_multiple_of_kv_heads_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 4096,
                "intermediate_size": 100,
                "num_hidden_layers": 2,
                "num_attention_heads": 32,
                "num_key_value_heads": 5,
                "vocab_size": 1000,
            }
        )
    )
    with pytest.raises(InputError, match="not a multiple of num_key_value_heads 5"):
        load_model(str(path))
