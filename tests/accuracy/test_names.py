"""Names in ground-truth files -> our hardware profiles, model presets and weight dtypes."""

from __future__ import annotations

import pytest

from ttftsim.accuracy.names import ResolvedHardware, ResolvedModel, resolve_hardware, resolve_model
from ttftsim.config.dtypes import WeightDtype


@pytest.mark.parametrize(
    ("system", "profile"),
    [
        ("a100_sxm", "A100-SXM4-80GB"),
        ("a100_pcie", "A100-PCIe-80GB"),
        ("h100_sxm", "H100-SXM5-80GB"),
        ("h100_pcie", "H100-PCIe-80GB"),
        ("h200_sxm", "H200-SXM-141GB"),
        ("l40s", "L40S-48GB"),
        ("H100_SXM", "H100-SXM5-80GB"),  # case does not matter
        ("H100-SXM5-80GB", "H100-SXM5-80GB"),  # our own names stay
    ],
)
def test_systems_map_to_profiles(system: str, profile: str) -> None:
    assert resolve_hardware(system) == ResolvedHardware(profile)


@pytest.mark.parametrize("system", ["tpu_v6e", "gb200_sxm", "h20", "h100"])  # no prefixes: h20 is not an H200
def test_a_system_without_a_profile_is_a_problem_naming_it(system: str) -> None:
    resolved = resolve_hardware(system)
    assert resolved.name == system
    assert resolved.problem is not None and f"no hardware profile for system {system!r}" in resolved.problem


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("meta-llama/Llama-3.1-70B-Instruct", ResolvedModel("Llama-3.1-70B", None)),
        ("meta-llama/Llama-3.1-70B", ResolvedModel("Llama-3.1-70B", None)),
        ("meta-llama/Llama-2-7b-hf", ResolvedModel("Llama-2-7b-hf", None)),
        ("codellama/CodeLlama-34b-Instruct-hf", ResolvedModel("CodeLlama-34b-Instruct-hf", None)),
        ("mistralai/Mistral-7B-Instruct-v0.1", ResolvedModel("Mistral-7B-v0.1", None)),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", ResolvedModel("Llama-3.1-8B", None)),
        ("Llama-3.1-8B", ResolvedModel("Llama-3.1-8B", None)),  # no organisation
        ("nvidia/Llama-3.1-8B-Instruct-FP8", ResolvedModel("Llama-3.1-8B", "fp8")),
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic", ResolvedModel("Llama-3.1-8B", "fp8")),
        ("RedHatAI/Llama-3.1-8B-Instruct-W8A8-FP8", ResolvedModel("Llama-3.1-8B", "fp8")),
        ("RedHatAI/Llama-3.1-8B-Instruct-W8A8", ResolvedModel("Llama-3.1-8B", "int8")),
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", ResolvedModel("Llama-3.1-8B", "int8")),
        ("RedHatAI/Meta-Llama-3.1-70B-Instruct-quantized.w4a16", ResolvedModel("Llama-3.1-70B", "int4")),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", ResolvedModel("Qwen2.5-7B", "int4")),
        ("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", ResolvedModel("Qwen2.5-72B", "int4")),
        ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", ResolvedModel("Llama-3.1-70B", "int4")),
    ],
)
def test_model_ids_map_to_a_preset_and_weight_dtype(model_id: str, expected: ResolvedModel) -> None:
    assert resolve_model(model_id) == expected


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [("fp8", "fp8"), ("fp8_block", "fp8"), ("int4_wo", "int4"), ("w8a8", "int8"), ("bf16", None), ("fp16", None)],
)
def test_precision_column(precision: str, dtype: WeightDtype | None) -> None:
    assert resolve_model("meta-llama/Llama-3.1-70B", precision) == ResolvedModel("Llama-3.1-70B", dtype)


@pytest.mark.parametrize(
    ("model_id", "precision", "reason"),
    [
        ("nvidia/Llama-3.1-8B-Instruct-FP4", None, "quantization suffix 'FP4' of 'nvidia/Llama-3.1-8B-Instruct-FP4'"),
        ("nvidia/Llama-3.1-70B-Instruct-NVFP4", None, "quantization suffix 'NVFP4'"),
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8", None, "quantization suffix 'GPTQ-Int8'"),  # W8A16: not our int8
        ("RedHatAI/Llama-3.1-8B-Instruct-quantized.w8a16", None, "quantization suffix 'quantized.w8a16'"),
        ("meta-llama/Llama-3.1-70B", "nvfp4", "precision 'nvfp4' of 'meta-llama/Llama-3.1-70B' has no weight dtype"),
        ("meta-llama/Llama-3.1-70B", "int8_wo", "precision 'int8_wo'"),
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "int4_wo", "is a fp8 checkpoint but the precision column says 'int4_wo'"),
        ("acme/Frontier-9000", None, "unknown model 'acme/Frontier-9000': no preset for 'Frontier-9000'"),
        ("acme/Frontier-9000-AWQ", None, "no preset for 'Frontier-9000'"),
    ],
)
def test_unknown_forms_are_problems_not_errors(model_id: str, precision: str | None, reason: str) -> None:
    resolved = resolve_model(model_id, precision)
    assert resolved.quantization is None
    assert resolved.model == model_id.rsplit("/", 1)[-1]
    assert resolved.problem is not None and reason in resolved.problem


def test_fp4_of_a_checkpoint_published_in_mxfp4_is_mxfp4() -> None:
    # AIConfigurator writes precision fp4 for gpt-oss, whose experts ship in MXFP4 (its quantization_config), even
    # on H100: that format (config/dtypes.py); fp4 of any other model has no weight dtype here
    assert resolve_model("openai/gpt-oss-120b", "fp4") == ResolvedModel("gpt-oss-120b", None)  # its own: mxfp4
    assert resolve_model("openai/gpt-oss-20b", "MXFP4") == ResolvedModel("gpt-oss-20b", None)
    assert resolve_model("Llama-3.1-8B", "mxfp4").problem is not None  # a dense MXFP4 checkpoint: no dtype here
    assert resolve_model("openai/gpt-oss-120b", "fp8") == ResolvedModel("gpt-oss-120b", "fp8")  # requantized
    assert resolve_model("openai/gpt-oss-120b", "nvfp4").problem is not None  # another 4-bit format
    assert resolve_model("meta-llama/Llama-3.1-70B", "fp4").problem is not None
