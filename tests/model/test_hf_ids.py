"""Hugging Face ids in parts: what names the architecture, what names the weight format."""

from __future__ import annotations

import pytest

from ttftsim.model.hf_ids import ModelId, name_key, parse_model_id


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", ModelId("Llama-3.1-8B-Instruct", "Llama-3.1-8B-Instruct", None, None)),
        (
            "nvidia/Llama-3.1-8B-Instruct-FP8",
            ModelId("Llama-3.1-8B-Instruct-FP8", "Llama-3.1-8B-Instruct", "FP8", "fp8"),
        ),
        (
            "RedHatAI/Qwen2.5-7B-Instruct-quantized.w8a8",
            ModelId("Qwen2.5-7B-Instruct-quantized.w8a8", "Qwen2.5-7B-Instruct", "quantized.w8a8", "int8"),
        ),
        (
            "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4",
            ModelId("Qwen2.5-7B-Instruct-GPTQ-Int4", "Qwen2.5-7B-Instruct", "GPTQ-Int4", "int4"),
        ),
        (
            "Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8",
            ModelId("Qwen2.5-7B-Instruct-GPTQ-Int8", "Qwen2.5-7B-Instruct", "GPTQ-Int8", None),
        ),
        (" Mistral-7B-v0.1 ", ModelId("Mistral-7B-v0.1", "Mistral-7B-v0.1", None, None)),
    ],
)
def test_ids_split_into_name_base_and_suffix(model_id: str, expected: ModelId) -> None:
    parsed = parse_model_id(model_id)
    assert parsed == expected
    assert parsed.has_unknown_format is (expected.suffix is not None and expected.dtype is None)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Meta-Llama-3.1-8B-Instruct", "Llama-3.1-8B"),
        ("Llama-2-7b-chat-hf", "Llama-2-7b-hf"),
        ("Mistral-7B-Instruct-v0.1", "Mistral-7B-v0.1"),
        ("gemma-3-27b-it", "gemma-3-27b-pt"),
        ("Qwen3-8B-Base", "qwen3-8b"),
        ("Mistral-Nemo-Instruct-2407", "Mistral-Nemo-Base-2407"),
    ],
)
def test_post_training_tags_do_not_count(a: str, b: str) -> None:
    assert name_key(a) == name_key(b)


@pytest.mark.parametrize(
    ("a", "b"), [("gpt-oss-20b", "gpt-oss-120b"), ("Qwen2.5-7B", "Qwen2.5-7B-1M"), ("phi-4", "Phi-4-mini")]
)
def test_different_models_stay_different(a: str, b: str) -> None:
    assert name_key(a) != name_key(b)
