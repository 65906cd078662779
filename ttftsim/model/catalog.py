"""Find a model by preset name, Hugging Face id, or a path to a config.json.

A Hugging Face id (meta-llama/Llama-3.1-8B-Instruct, nvidia/Llama-3.1-8B-Instruct-FP8,
Qwen/Qwen2.5-7B-Instruct-AWQ) resolves to the preset with its architecture (ttftsim/model/hf_ids.py says how
ids compare) and takes its weight format from the quantization suffix. A preset may list other names with the
same architecture and context length (`aliases`, e.g. Phi-3-mini-128k-instruct for Phi-3.5-mini-instruct).
Nothing is fetched: the presets are the offline source, and any other model is a path to its config.json.
"""

from __future__ import annotations

import difflib
import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ttftsim.errors import InputError
from ttftsim.inputs.files import is_dir, is_file
from ttftsim.inputs.structured import load_structured
from ttftsim.model.hf_config import spec_from_hf_config
from ttftsim.model.hf_ids import name_key, parse_model_id
from ttftsim.model.spec import ModelSpec

MAX_SUGGESTIONS = 3


def preset_names() -> list[str]:
    folder = resources.files("ttftsim.model") / "presets"
    return sorted(entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json"))


def _preset_text(preset: str) -> str:
    return (resources.files("ttftsim.model") / "presets" / f"{preset}.json").read_text(encoding="utf-8")


def preset_repository(name: str) -> str | None:
    """The Hugging Face repository a preset was written from (its `source` starts with it), for a
    deployment that must name the weights to load; None for a name that is not a preset."""
    if name not in preset_names():
        return None
    first = str(json.loads(_preset_text(name)).get("source", "")).split(" ", 1)[0].rstrip(":,;")
    return first if first.count("/") == 1 else None


@lru_cache(maxsize=1)
def _preset_keys() -> dict[str, str]:
    """name_key of every preset and of its aliases -> the preset (the package's files: read once)."""
    keys: dict[str, str] = {}
    for preset in preset_names():
        aliases = json.loads(_preset_text(preset)).get("aliases", [])
        for name in [preset, *aliases]:
            keys[name_key(name)] = preset
    return keys


def find_preset(name: str) -> str | None:
    """The preset a model name (organisation and quantization suffix already removed) has the architecture of."""
    return _preset_keys().get(name_key(name))


def closest_presets(name: str) -> list[str]:
    """Up to MAX_SUGGESTIONS presets whose names are nearest to `name` (difflib), nearest first."""
    keys = _preset_keys()
    near = difflib.get_close_matches(name_key(name), list(keys), n=3 * MAX_SUGGESTIONS, cutoff=0.6)
    return list(dict.fromkeys(keys[key] for key in near))[:MAX_SUGGESTIONS]


def _unknown(ref: str, base: str) -> str:
    near = closest_presets(base)
    hint = f"closest presets: {', '.join(near)}" if near else "`ttftsim models` lists the presets"
    return (
        f"unknown model {ref!r}: no preset for {base!r} ({hint}); "
        "for another model give the path to its Hugging Face config.json instead"
    )


def _load_config_file(config_path: Path) -> ModelSpec:
    config = load_structured(config_path, "model config.json")  # size, UTF-8, bounded JSON (ttftsim/inputs)
    if not isinstance(config, dict):
        raise InputError(str(config_path), "", "config.json must hold a JSON object")
    name = config_path.parent.name if config_path.name == "config.json" else config_path.stem
    return spec_from_hf_config(config, name, str(config_path))


UNMODELLED_FORMAT = "unmodelled weight format"
_INSTRUCT = re.compile(r"[-_]instruct(?=[-_]|$)", re.IGNORECASE)


def load_model(ref: str, source: str = "model") -> ModelSpec:
    """A preset (``Llama-3.1-70B``), a Hugging Face id (``meta-llama/Llama-3.1-70B-Instruct``,
    ``RedHatAI/Meta-Llama-3.1-70B-Instruct-FP8-dynamic``: the preset in fp8) or a config.json path."""
    field = "" if source.startswith("--") else "model"  # a CLI option names itself
    if not ref.strip():  # Path("") is the current folder: never read a config.json nobody named
        raise InputError(source, field, "no model named (empty)")
    path = Path(ref)
    if path.suffix == ".json" or is_file(path) or is_dir(path):  # a name too long for a path is no file
        config_path = path / "config.json" if is_dir(path) else path
        if not is_file(config_path):  # the field that names it is what is wrong
            where = f"in the folder {path.resolve()}" if is_dir(path) else f"at {path}"
            raise InputError(source, field, f"no model config.json {where}")
        return _load_config_file(config_path)
    model_id = parse_model_id(ref)
    if model_id.has_unknown_format:
        raise InputError(
            source,
            field,
            f"{UNMODELLED_FORMAT} {model_id.suffix!r} of {ref!r} (weight-only int8, 4-bit floats, bitsandbytes, GGUF "
            "are not modelled; ttftsim models bf16, fp16, fp8, int8 as W8A8 and int4 weights): name a modelled "
            f"checkpoint of the same model, e.g. {model_id.base}-AWQ (int4) or {model_id.base}-FP8",
        )
    preset = find_preset(model_id.base)
    if preset is None:
        raise InputError(source, field, _unknown(ref, model_id.base))
    config = json.loads(_preset_text(preset))
    spec = spec_from_hf_config(config, preset, f"preset {preset}")
    if "instruct_max_position_embeddings" in config and _INSTRUCT.search(model_id.base):
        # the Instruct checkpoint's config.json declares fewer positions than the base's (Qwen2.5-7B and up)
        spec = spec.model_copy(update={"max_position_embeddings": config["instruct_max_position_embeddings"]})
    if model_id.dtype is None:
        return spec
    return spec.model_copy(update={"native_dtype": model_id.dtype})
