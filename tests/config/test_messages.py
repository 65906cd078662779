"""One-line errors that name the field the user got wrong: the cause, not a consequence of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim.config.deploy import Deploy
from ttftsim.config.loading import parse_mapping, read_mapping
from ttftsim.config.scenario import Scenario
from ttftsim.errors import InputError
from ttftsim.model.hf_config import spec_from_hf_config
from ttftsim.validate.vllm_checks import upstream_vllm_image

ROOT = Path(__file__).resolve().parents[2]
SCENARIO: dict[str, Any] = {
    "model": "Llama-3.1-8B",
    "hardware": "H100-SXM5-80GB",
    "workload": {
        "type": "synthetic",
        "arrivals": {"type": "poisson", "rate": 5},
        "prompt_tokens": {"type": "fixed", "value": 512},
        "output_tokens": {"type": "fixed", "value": 64},
        "num_requests": 10,
    },
}


def _error(data: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as caught:
        parse_mapping(Scenario, data, "s.yaml")
    return caught.value


def test_a_misspelt_field_is_named_with_the_field_it_meant_not_reported_missing() -> None:
    data = {k: v for k, v in SCENARIO.items() if k != "workload"} | {"workloda": SCENARIO["workload"]}
    error = _error(data)
    assert (error.field, error.message) == ("workloda", "unknown field (did you mean workload?)")


@pytest.mark.parametrize(
    ("part", "given", "message"),
    [
        (
            "arrivals",
            {"type": "poison", "rate": 5},
            "'poison' is not one of poisson, constant, gamma, weibull, stages, "
            "rate_curve, closed_loop (did you mean poisson?)",
        ),
        (
            "prompt_tokens",
            {"type": "constant", "value": 512},
            "'constant' is not one of fixed, uniform, normal, lognormal, empirical (did you mean fixed?)",
        ),  # the arrivals' word for it
        ("output_tokens", {"type": "zipf"}, "'zipf' is not one of fixed, uniform, normal, lognormal, empirical"),
    ],
)
def test_an_unknown_variant_lists_the_ones_there_are_and_the_one_likely_meant(
    part: str, given: dict[str, Any], message: str
) -> None:
    error = _error(SCENARIO | {"workload": SCENARIO["workload"] | {part: given}})
    assert (error.field, error.message) == (f"workload.{part}.type", message)


def test_a_mean_outside_the_clip_range_is_refused_without_pydantics_prefix() -> None:
    workload = SCENARIO["workload"] | {"prompt_tokens": {"type": "lognormal", "mean": 1000, "std": 800, "high": 500}}
    error = _error(SCENARIO | {"workload": workload})
    assert error.field == "workload.prompt_tokens"
    assert error.message.startswith("mean (1000) is outside [low, high] = [1, 500]")  # no "Value error, "
    normal = SCENARIO["workload"] | {"output_tokens": {"type": "normal", "mean": 5, "std": 1, "low": 10}}
    assert _error(SCENARIO | {"workload": normal}).message.startswith("mean (5) is outside [low, high] = [10, ")


def test_a_config_json_shape_field_of_the_wrong_type_is_named_not_the_field_derived_from_it() -> None:
    config = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": "32", "num_hidden_layers": 32}
    config |= {"intermediate_size": 14336, "vocab_size": 128256, "num_key_value_heads": 8}
    with pytest.raises(InputError) as caught:
        spec_from_hf_config(config, "m", "m/config.json")
    assert (caught.value.field, caught.value.message) == ("num_attention_heads", "must be an integer, got '32'")


@pytest.mark.parametrize(
    ("image", "upstream"),
    [
        ("vllm/vllm-openai:v0.8.5", True),
        ("docker.io/vllm/vllm-openai:latest", True),
        ("localhost:5000/vllm/vllm-openai:v0.9.0", True),
        ("vllm/vllm-openai-rocm:v0.10.2", True),  # the image ttftsim's plans write for AMD GPUs
        ("vllm/vllm-openai-cpu:v0.32.0", True),
        ("opea/vllm-gaudi:1.22.0", False),  # Gaudi software 1.22, not vLLM 1.22
        ("lmcache/vllm-openai:v0.3.9post2", False),  # LMCache's release
    ],
)
def test_only_vllms_own_image_tags_are_read_as_vllm_versions(image: str, upstream: bool) -> None:
    assert upstream_vllm_image(image) is upstream


def test_a_model_the_manifest_serves_from_a_path_is_an_error_in_the_manifest_saying_where_to_name_it(
    tmp_path: Path,
) -> None:
    """KServe's vLLM serves /mnt/models: the error names the manifest (where the name came from), not the deploy
    file."""
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(
        "name: ext\nhardware: H100-SXM5-80GB\ntraffic:\n  type: synthetic\n  arrivals: {type: poisson, rate: 4}\n"
        "  prompt_tokens: {type: fixed, value: 1000}\n  output_tokens: {type: fixed, value: 100}\n  duration_s: 30\n"
        "slo:\n  ttft_p99_s: 0.5\n"
    )
    manifest = ROOT / "tests" / "data" / "manifests" / "kserve-fluid-isvc.yaml"
    result = run("validate", str(deploy), "--manifest", str(manifest))
    _assert_one_line_error(result, "kserve-fluid-isvc.yaml", "/mnt/models", "name the model in")
    assert f"{deploy}: model:" not in result.stderr


@pytest.mark.parametrize(
    ("edit", "field", "meant"),
    [
        ({"engine": {"max_num_seq": 64}}, "engine.max_num_seq", "max_num_seqs"),
        ({"sede": 3}, "sede", "seed"),
        ({"workload": SCENARIO["workload"] | {"duraton_s": 60}}, "workload.duraton_s", "duration_s"),
        (
            {"workload": SCENARIO["workload"] | {"arrivals": {"type": "poisson", "rat": 5}}},
            "workload.arrivals.rat",
            "rate",
        ),
    ],
)
def test_a_misspelt_optional_field_gets_the_nearest_field_of_its_model(
    edit: dict[str, Any], field: str, meant: str
) -> None:
    """Nothing is missing to suggest from: the schema's own fields at that place (through tagged unions)."""
    error = _error(SCENARIO | edit)
    assert (error.field, error.message) == (field, f"unknown field (did you mean {meant}?)")


@pytest.mark.parametrize(
    "router",
    [
        {"type": "least_outstanding", "queue_weight": "high"},
        {"queue_weight": "high"},  # no type: round robin, the tag the section's validator adds
    ],
)
def test_a_tagged_sections_error_names_the_field_as_the_file_has_it_not_pydantics_tag(router: dict[str, Any]) -> None:
    """pydantic's location is cluster.router.least_outstanding.queue_weight (the member's tag after the field);
    the file has no such key."""
    error = _error(SCENARIO | {"cluster": {"replicas": 2, "router": router}})
    assert error.field == "cluster.router.queue_weight"
    workload = SCENARIO["workload"] | {"arrivals": {"type": "poisson", "rate": -1}}
    assert _error(SCENARIO | {"workload": workload}).field == "workload.arrivals.rate"


def test_a_tagged_section_without_its_type_names_the_field_and_the_types_there_are() -> None:
    """pydantic says "Unable to extract tag using discriminator 'type'" on the section."""
    untyped = {k: v for k, v in SCENARIO["workload"].items() if k != "type"}
    error = _error(SCENARIO | {"workload": untyped})
    assert (error.field, error.message) == (
        "workload.type",
        "missing: one of synthetic, shared_prefix, conversation, trace",
    )
    workload = SCENARIO["workload"] | {"arrivals": {"rate": 5}}
    error = _error(SCENARIO | {"workload": workload})
    assert error.field == "workload.arrivals.type"
    assert error.message.startswith("missing: one of poisson, constant, gamma")


def test_targets_for_a_priority_class_the_traffic_does_not_have_are_an_input_error() -> None:
    """They could never be judged: the run failed them with no figure (exit 1), as if a class had been served."""
    error = _error(SCENARIO | {"slo": {"per_priority": {3: {"ttft_p99_s": 0.5}}}})
    assert (error.field, error.message) == (
        "slo.per_priority.3",
        "the workload has one priority, 0 (priority_levels 1)",
    )
    two = SCENARIO["workload"] | {"priority_levels": 2}
    error = _error(SCENARIO | {"workload": two, "slo": {"per_priority": {1: {"ttft_p99_s": 1}, 5: {"ttft_p99_s": 1}}}})
    assert (error.field, error.message) == (
        "slo.per_priority.5",
        "the workload has priorities 0..1 (priority_levels 2)",
    )
    deploy = {"model": "Llama-3.1-8B", "hardware": "H100-SXM5-80GB", "traffic": SCENARIO["workload"]}
    deploy |= {"slo": {"ttft_p99_s": 0.5, "per_priority": {1: {"ttft_p99_s": 1}}}}
    with pytest.raises(InputError) as caught:
        parse_mapping(Deploy, deploy, "d.yaml")
    assert (caught.value.field, caught.value.message) == (
        "slo.per_priority.1",
        "the traffic has one priority, 0 (priority_levels 1)",
    )


def test_a_priority_class_whose_targets_cannot_be_judged_is_named_as_the_field() -> None:
    error = _error(SCENARIO | {"slo": {"per_priority": {0: {"itl_p99_s": 0.1}}}})
    assert error.field == "slo.per_priority.0"  # was `slo`, with the class at the start of the message
    assert error.message.startswith("itl_p99_s cannot be judged per class")


def test_a_maps_bad_key_is_named_as_the_key_not_pydantics_key_marker() -> None:
    error = _error(SCENARIO | {"slo": {"per_priority": {"high": {"ttft_p99_s": 0.5}}}})
    assert error.field == "slo.per_priority.high"  # was slo.per_priority.high.[key]
    assert error.message.startswith("as a key: Input should be a valid integer")


def test_a_tag_that_is_also_a_field_of_its_member_is_read_as_the_tag() -> None:
    """Staged arrivals' tag is `stages`, and so is their list: the path was workload.arrivals.stages.stages.0.rate."""
    arrivals = {"type": "stages", "stages": [{"rate": 0, "duration_s": 5}]}
    error = _error(SCENARIO | {"workload": SCENARIO["workload"] | {"arrivals": arrivals}})
    assert error.field == "workload.arrivals.stages.0.rate"


@pytest.mark.parametrize(
    ("text", "got"),
    [("", "nothing (an empty file)"), ("# a comment\n---\n", "nothing (an empty file)"), ("null\n", "null")],
)
def test_a_file_without_a_mapping_says_whether_it_is_empty_or_null(tmp_path: Path, text: str, got: str) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        read_mapping(path)
    assert str(raised.value).endswith(f"top level must be a mapping, got {got}")
