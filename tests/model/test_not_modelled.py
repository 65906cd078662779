"""What a config.json declares and the simulator does not model is one warning each, and nothing else is."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from ttftsim.model.catalog import load_model
from ttftsim.model.not_modelled import model_warnings


def _config(tmp_path: Path, preset: str, **fields: Any) -> Path:
    """A user's config.json: a preset's, with fields added (None drops one)."""
    text = (resources.files("ttftsim.model") / "presets" / f"{preset}.json").read_text(encoding="utf-8")
    config = {k: v for k, v in (json.loads(text) | fields).items() if v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_a_sliding_window_kept_where_vllm_frees_it_warns_once() -> None:
    """The windowed KV manager frees the window (kvcache/windowed.py); only an engine it does not run in (KV
    offloading, LMCache, a static cache: window_kept) keeps those tokens, and says so."""
    mistral = load_model("Mistral-7B-v0.1")
    assert mistral.sliding_window == 4096
    assert model_warnings(mistral, 8192, "bf16") == []  # freed as vLLM frees it
    (warning,) = model_warnings(mistral, 8192, "bf16", window_kept=True)
    assert warning == (
        "sliding_window=4096 (Mistral-7B-v0.1) is modelled in attention time but not in the KV cache of this engine "
        "(KV offloading, LMCache or a static cache): the windowed layers keep every token, where vLLM frees the "
        "blocks that fall out of the window, so contexts longer than 4,096 tokens (max_model_len 8,192) hold more KV "
        "blocks than in vLLM (fewer requests fit, preemption comes sooner); exact up to 4,096 tokens"
    )
    gemma = load_model("gemma-3-27b-pt")
    assert model_warnings(gemma, 8192, "bf16", window_kept=True)[0].startswith(
        "sliding_window=1024 (gemma-3-27b-pt, 52 of 62 layers) "
    )
    assert model_warnings(mistral, 4096, "bf16", window_kept=True) == []  # never longer than the window: exact


@pytest.mark.parametrize("preset", ["Llama-3.1-8B", "Qwen2.5-7B", "Mixtral-8x7B-v0.1"])
def test_models_without_a_window_do_not_warn(preset: str) -> None:
    spec = load_model(preset)
    assert model_warnings(spec, spec.max_position_embeddings, spec.native_dtype) == []


@pytest.mark.parametrize(("use_sliding_window", "warns"), [(False, False), (True, True)])
def test_qwen2_window_counts_only_with_use_sliding_window(
    tmp_path: Path, use_sliding_window: bool, warns: bool
) -> None:
    path = _config(tmp_path, "Qwen2.5-7B", sliding_window=32768, use_sliding_window=use_sliding_window)
    assert bool(model_warnings(load_model(str(path)), 131072, "bf16", window_kept=True)) is warns


def test_a_users_config_with_a_window_warns(tmp_path: Path) -> None:
    spec = load_model(str(_config(tmp_path, "Mistral-7B-v0.1", sliding_window=2048)))
    warnings = model_warnings(spec, 32768, "bf16", window_kept=True)
    assert [w.split(" is ")[0] for w in warnings] == [f"sliding_window=2048 ({spec.name})"]
    assert load_model(str(_config(tmp_path, "Mistral-7B-v0.1", sliding_window=None))).sliding_window is None


def test_a_quantized_checkpoint_warns_unless_the_engine_quantizes(tmp_path: Path) -> None:
    spec = load_model(str(_config(tmp_path, "Llama-3.1-8B", quantization_config={"quant_method": "awq"})))
    (warning,) = model_warnings(spec, 8192, "bf16")
    assert "quant_method awq" in warning and "weights are sized and read as bf16" in warning
    assert "(closest for awq: quantization: int4)" in warning
    assert model_warnings(spec, 8192, "int4") == []


def test_an_fp8_checkpoint_is_the_fp8_weight_format_without_a_warning(tmp_path: Path) -> None:
    """quant_method fp8 (DeepSeek-V3's 128x128 blocks, vLLM's own fp8 checkpoints) stores fp8 weights."""
    spec = load_model(str(_config(tmp_path, "Llama-3.1-8B", quantization_config={"quant_method": "fp8"})))
    assert (spec.native_dtype, spec.quantization_method) == ("fp8", None)
    assert model_warnings(spec, 8192, "fp8") == []
