"""Hugging Face model ids, split into the part that names an architecture and the part that names the
checkpoint's weight format.

- The organisation goes (meta-llama/, nvidia/, RedHatAI/, Qwen/, ...): a republished checkpoint has the
  architecture of the model it republishes.
- A quantization suffix at the end (after "-", "_" or "."; case aside) gives the weight dtype: -FP8,
  -FP8-dynamic, -W8A8-FP8 (fp8); -W8A8, -quantized.w8a8, -Int8 (int8, weights and activations); -AWQ,
  -GPTQ-Int4, -quantized.w4a16, -Int4 (int4). Formats no WeightDtype expresses (weight-only int8 such as
  GPTQ-Int8, FP4/NVFP4/MXFP4, W4A8, bitsandbytes, GGUF, EXL2) are recognised, with dtype None: an -MXFP4 suffix
  (AMD Quark's dense checkpoints quantize every linear) is not our mxfp4, which quantizes a MoE's experts alone
  and is read from a gpt-oss config.json's quantization_config.
- What is left compares by `name_key`: lower case, without the post-training tags (-Instruct, -Chat,
  -hf, -Base, -it, -pt) and without Meta- before Llama, since an instruct or chat variant has its base
  model's architecture (Meta-Llama-3.1-8B-Instruct and Llama-3.1-8B compare equal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ttftsim.config.dtypes import WeightDtype

# Checkpoint suffixes, most specific first.
_SUFFIXES: tuple[tuple[str, WeightDtype | None], ...] = (
    (r"fp8(?:[-_](?:dynamic|static|block))?", "fp8"),
    (r"w8a8[-_]fp8", "fp8"),
    (r"(?:quantized\.)?w8a8(?:[-_]int8)?", "int8"),
    (r"(?:quantized\.)?w4a16", "int4"),
    (r"(?:awq|gptq)(?:[-_](?:int4|4bit))?", "int4"),
    (r"int8", "int8"),
    (r"int4", "int4"),
    # recognised as quantization, but no WeightDtype fits: weight-only int8 (GPTQ-Int8 runs as W8A16; our
    # int8 is W8A8), 4-bit floats, int4 weights with fp8 activations, bitsandbytes, GGUF, ...
    (r"(?:quantized\.)?w8a16|gptq[-_](?:int8|8bit)|(?:nv|mx)?fp4|w4a8|w4afp8|bnb[-_]4bit|gguf|exl2", None),
)
_SUFFIX = re.compile(r"[-_.](" + "|".join(f"(?:{p})" for p, _ in _SUFFIXES) + r")$", re.IGNORECASE)
_NAME_NOISE = re.compile(r"[-_](instruct|chat|hf|base|it|pt)(?=[-_]|$)", re.IGNORECASE)
WEIGHT_DTYPES = "bf16, fp16, fp8, int8, int4, mxfp4"


@dataclass(frozen=True)
class ModelId:
    """A model id in parts. Invariant: dtype is None when suffix is None; base + suffix is the name."""

    name: str  # the id without its organisation
    base: str  # the name without its quantization suffix
    suffix: str | None  # the quantization suffix as written (FP8-dynamic, AWQ, quantized.w4a16, ...)
    dtype: WeightDtype | None  # the suffix's weight dtype; None without a suffix or for a format we lack

    @property
    def has_unknown_format(self) -> bool:
        """A quantization suffix no WeightDtype expresses (NVFP4, GPTQ-Int8, ...)."""
        return self.suffix is not None and self.dtype is None


def suffix_dtype(suffix: str) -> WeightDtype | None:
    """The weight dtype of a quantization suffix (None: recognised, but no WeightDtype fits)."""
    for pattern, dtype in _SUFFIXES:
        if re.fullmatch(pattern, suffix, re.IGNORECASE):
            return dtype
    return None


def parse_model_id(model_id: str) -> ModelId:
    """An id such as RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic, split (no lookup of presets here)."""
    name = model_id.strip().rsplit("/", 1)[-1]
    match = _SUFFIX.search(name)
    if match is None:
        return ModelId(name, name, None, None)
    suffix = match.group(1)
    return ModelId(name, name[: match.start()], suffix, suffix_dtype(suffix))


def name_key(name: str) -> str:
    """The comparable form of a model name: lower case, no post-training tags, no Meta- before Llama."""
    key = _NAME_NOISE.sub("", name.strip().rsplit("/", 1)[-1]).lower()
    return key.removeprefix("meta-") if key.startswith("meta-llama") else key
