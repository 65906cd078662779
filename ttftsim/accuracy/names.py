"""The names ground-truth files give a deployment, turned into ours: a hardware profile, a model preset, a
weight dtype.

- Systems: AIConfigurator's names (h100_sxm, a100_sxm, l40s, b200_sxm, ...) map to the hwprofiles/ profile
  that names it (its aiconfigurator_system; a100_sxm is the 80 GB part); a profile name (H100-SXM5-80GB)
  stays as it is. A system with no profile is a problem.
  Names match exactly (case aside), not by prefix as scenario files may: h20 is not the H200.
- Models: a Hugging Face id with an organisation (nvidia/, meta-llama/, RedHatAI/, ...) and a checkpoint
  quantization suffix (-FP8, -FP8-dynamic, -AWQ, -GPTQ-Int4, -W8A8, -quantized.w4a16, ...) maps to the
  model preset (Meta-Llama-3.1-8B-Instruct -> Llama-3.1-8B) and a WeightDtype, by the rules of
  ttftsim/model/hf_ids.py that scenario files' `model:` follows too.
- Precision columns (AIConfigurator's precision: bf16, fp8, fp8_block, int4_wo, nvfp4, ...) map to a
  WeightDtype; bf16/fp16 mean the checkpoint's own dtype (quantization None).
A format our dtypes cannot express (FP4, W4A8, weight-only int8, bitsandbytes, GGUF, ...) is a problem, as is
a suffix that disagrees with the precision column. Problems are reasons to skip a case, never exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.config.dtypes import WeightDtype
from ttftsim.hardware.catalog import all_profiles, hardware_for_system
from ttftsim.model.catalog import closest_presets, find_preset, load_model
from ttftsim.model.hf_ids import WEIGHT_DTYPES, parse_model_id

_UNQUANTIZED = {"", "bf16", "bfloat16", "fp16", "float16", "half", "auto"}
PRECISIONS: dict[str, WeightDtype] = {
    "fp8": "fp8",
    "fp8_block": "fp8",
    "fp8_static": "fp8",
    "fp8_dynamic": "fp8",
    "int8": "int8",
    "w8a8": "int8",
    "sq": "int8",  # AIConfigurator's SmoothQuant: int8 weights and activations
    "int4": "int4",
    "int4_wo": "int4",
    "w4a16": "int4",
    "awq": "int4",
    "gptq": "int4",
}


@dataclass(frozen=True)
class ResolvedModel:
    """A model id as a preset name and weight dtype (None: the checkpoint's own). When problem is set, model is
    the id without its organisation and the case cannot be simulated for that reason."""

    model: str
    quantization: WeightDtype | None
    problem: str | None = None


@dataclass(frozen=True)
class ResolvedHardware:
    """A system as a hardware profile name; when problem is set, name is the system as given."""

    name: str
    problem: str | None = None


def resolve_hardware(system: str) -> ResolvedHardware:
    """An AIConfigurator system name or one of our profile names, exactly (case aside): no prefixes, since
    a system such as h20 would otherwise be taken for the H200."""
    key = system.strip().lower()
    named = hardware_for_system(key)
    if named is not None:
        return ResolvedHardware(named)
    profiles = {profile.name.lower(): profile.name for profile in all_profiles()}
    if key in profiles:
        return ResolvedHardware(profiles[key])
    known = ", ".join(sorted(p.aiconfigurator_system for p in all_profiles() if p.aiconfigurator_system))
    return ResolvedHardware(
        system, f"no hardware profile for system {system!r} (systems with one: {known}; or a hwprofiles/ name)"
    )


def _precision_key(precision: str | None) -> str:
    return "" if precision is None else precision.strip().lower()


def precision_dtype(precision: str | None) -> WeightDtype | None:
    """A precision column's weight dtype; None for unquantized (bf16, fp16) or an unknown value."""
    return PRECISIONS.get(_precision_key(precision))


def is_known_precision(precision: str | None) -> bool:
    key = _precision_key(precision)
    return key in _UNQUANTIZED or key in PRECISIONS


def _model_problem(
    model_id: str, suffix: str | None, suffix_dtype: WeightDtype | None, precision: str | None
) -> str | None:
    """Why a model id's suffix and the precision column give no single weight dtype, if they do not."""
    if suffix is not None and suffix_dtype is None:
        return f"quantization suffix {suffix!r} of {model_id!r} has no weight dtype ({WEIGHT_DTYPES})"
    if not is_known_precision(precision):
        return f"precision {precision!r} of {model_id!r} has no weight dtype ({WEIGHT_DTYPES})"
    if suffix is not None and precision is not None and precision_dtype(precision) != suffix_dtype:
        return f"{model_id!r} is a {suffix_dtype} checkpoint but the precision column says {precision!r}"
    return None


# Precision columns that name a 4-bit float format. A checkpoint published in MXFP4 (gpt-oss: its experts'
# quantization_config) is served in that format whatever the column calls it (AIConfigurator writes fp4, with
# nvfp4 quant modes, for gpt-oss on H100 too, which has no FP4 unit).
_FP4 = {"fp4", "mxfp4"}


def _own_fp4(preset: str | None, precision: str | None) -> bool:
    """Whether the column names the 4-bit float format the preset's checkpoint is published in (MXFP4): the
    checkpoint's own format, then."""
    if preset is None or _precision_key(precision) not in _FP4:
        return False
    return load_model(preset).native_dtype == "mxfp4"


def resolve_model(model_id: str, precision: str | None = None) -> ResolvedModel:
    """A Hugging Face id (organisation and quantization suffix optional; ttftsim/model/hf_ids.py) and an
    optional precision column."""
    parsed = parse_model_id(model_id)
    preset = find_preset(parsed.base)
    if parsed.suffix is None and _own_fp4(preset, precision):
        precision = None  # the checkpoint's own format (dtype None)
    problem = _model_problem(model_id, parsed.suffix, parsed.dtype, precision)
    if problem is None and preset is None:
        near = ", ".join(closest_presets(parsed.base)) or "none near; `ttftsim models` lists them"
        problem = f"unknown model {model_id!r}: no preset for {parsed.base!r} (closest presets: {near})"
    if problem is not None or preset is None:
        return ResolvedModel(parsed.name, None, problem)
    return ResolvedModel(preset, parsed.dtype or precision_dtype(precision))
