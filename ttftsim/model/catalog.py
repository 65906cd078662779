"""Find a model by preset name, Hugging Face repo id, or a path to a config.json."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from ttftsim.errors import InputError
from ttftsim.inputs.structured import load_structured
from ttftsim.model.spec import ModelSpec, spec_from_hf_config

_SUFFIXES = ("-instruct", "-chat-hf", "-hf", "-chat")


def preset_names() -> list[str]:
    folder = resources.files("ttftsim.model") / "presets"
    return sorted(entry.name.removesuffix(".json") for entry in folder.iterdir() if entry.name.endswith(".json"))


def _normalize(name: str) -> str:
    key = name.rsplit("/", 1)[-1].lower()
    for suffix in _SUFFIXES:
        key = key.removesuffix(suffix)
    return key


def _preset_text(name: str) -> tuple[str, str] | None:
    wanted = _normalize(name)
    for preset in preset_names():
        if _normalize(preset) == wanted:
            text = (resources.files("ttftsim.model") / "presets" / f"{preset}.json").read_text(encoding="utf-8")
            return preset, text
    return None


def load_model(ref: str, source: str = "model") -> ModelSpec:
    """A preset (``Llama-3.1-70B``, ``meta-llama/Llama-3.1-70B-Instruct``) or a config.json path."""
    path = Path(ref)
    if path.suffix == ".json" or path.is_file() or path.is_dir():
        config_path = path / "config.json" if path.is_dir() else path
        config = load_structured(config_path, "model config.json")  # size, UTF-8, bounded JSON (ttftsim/inputs)
        if not isinstance(config, dict):
            raise InputError(str(config_path), "", "config.json must hold a JSON object")
        name = config_path.parent.name if config_path.name == "config.json" else config_path.stem
        return spec_from_hf_config(config, name, str(config_path))
    found = _preset_text(ref)
    if found is None:
        raise InputError(
            source,
            "model",
            f"unknown model {ref!r}: not a preset ({', '.join(preset_names())}) and not a path to a config.json",
        )
    preset, text = found
    return spec_from_hf_config(json.loads(text), preset, f"preset {preset}")
