"""A user's own config.json read as transformers and vLLM read it (cold trial F): the context vLLM derives (rope
scaling, the default without max_position_embeddings), the LM head tied by the families that tie by default, and
fields of the wrong type refused, never coerced."""

from __future__ import annotations

from typing import Any

import pytest

from ttftsim.errors import InputError
from ttftsim.model.hf_config import spec_from_hf_config

BASE: dict[str, Any] = {
    "model_type": "llama",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "num_hidden_layers": 28,
    "vocab_size": 128256,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}


def spec(**fields: Any) -> Any:
    config = {k: v for k, v in (BASE | fields).items() if v is not None}
    return spec_from_hf_config(config, "mine", "config.json")


@pytest.mark.parametrize(
    ("rope_scaling", "context"),
    [
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}, 131072),  # Qwen2.5's
        ({"type": "linear", "factor": 4.0}, 131072),  # the older key
        ({"rope_type": "dynamic", "factor": 2.0}, 65536),
        ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}, 32768),  # not scaled
        ({"rope_type": "longrope", "factor": 32.0}, 32768),
        ({"rope_type": "default"}, 32768),  # no factor: 1
    ],
)
def test_the_context_is_scaled_as_vllm_derives_it(rope_scaling: dict[str, Any], context: int) -> None:
    """vllm/config/model.py _get_and_verify_max_len: a rope type other than su, longrope and llama3 multiplies the
    derived length by its factor, yarn from original_max_position_embeddings."""
    assert spec(rope_scaling=rope_scaling).max_position_embeddings == context


def test_gemma3s_length_is_already_scaled_and_a_missing_one_is_vllms_2048() -> None:
    linear = {"rope_type": "linear", "factor": 8.0}
    assert (
        spec(model_type="gemma3_text", rope_scaling=linear, max_position_embeddings=131072).max_position_embeddings
        == 131072
    )
    assert spec(max_position_embeddings=None).max_position_embeddings == 2048  # was 4096, not vLLM's


@pytest.mark.parametrize("model_type", ["gemma", "gemma2", "gemma3_text", "cohere"])
def test_families_that_tie_by_default_tie_when_the_config_leaves_it_out(model_type: str) -> None:
    assert spec(model_type=model_type).tie_word_embeddings
    assert not spec(model_type=model_type, tie_word_embeddings=False).tie_word_embeddings
    assert not spec().tie_word_embeddings  # llama's default: untied


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("vocab_size", "128256", "must be an integer"),
        ("vocab_size", True, "must be an integer"),  # read as 1 before: the embedding vanished
        ("intermediate_size", "8192", "must be an integer"),
        ("max_position_embeddings", "131072", "must be an integer"),
        ("tie_word_embeddings", "true", "must be true or false"),
        ("torch_dtype", "bfloat61", "is not a torch dtype"),
        ("torch_dtype", "float8_e4m3fn", "is not a torch dtype"),
    ],
)
def test_a_field_of_the_wrong_type_is_refused_naming_it(field: str, value: Any, message: str) -> None:
    with pytest.raises(InputError) as caught:
        spec(**{field: value})
    assert (caught.value.source, caught.value.field) == ("config.json", field) and message in caught.value.message
    assert spec(torch_dtype="float32").native_dtype == "bf16"  # served in 16 bits, as vLLM's auto dtype
