"""Read YAML or JSON files into schemas, turning every failure into a one-line `InputError`.

The error names the file and the dotted path of the field (``engine.max_num_seqs``), never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ttftsim.errors import InputError

SchemaT = TypeVar("SchemaT", bound=BaseModel)


def read_mapping(path: Path) -> dict[str, Any]:
    """Parse a YAML or JSON file that must hold a mapping at top level."""
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(source, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(source, "", f"cannot read file ({exc.__class__.__name__}: {exc})") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        first_line = str(exc).strip().splitlines()
        raise InputError(source, "", f"not valid {_format_name(path)}: {' '.join(first_line)}") from None
    if not isinstance(data, dict):
        raise InputError(source, "", f"top level must be a mapping, got {type(data).__name__}")
    return data


def _format_name(path: Path) -> str:
    return "JSON" if path.suffix == ".json" else "YAML"


def validation_error(source: str, exc: ValidationError) -> InputError:
    """The first error of a pydantic ValidationError as an InputError (source, dotted field, message)."""
    first = exc.errors(include_url=False)[0]
    field = ".".join(str(part) for part in first["loc"])
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown field"
    elif "input" in first and first["type"] not in ("missing",) and not isinstance(first["input"], dict):
        message = f"{message} (got {first['input']!r})"
    return InputError(source, field, message)


def parse_mapping(schema: type[SchemaT], data: dict[str, Any], source: str) -> SchemaT:
    """Validate an already-read mapping against a schema."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise validation_error(source, exc) from None


def load_file(schema: type[SchemaT], path: Path) -> SchemaT:
    """Read and validate one file."""
    return parse_mapping(schema, read_mapping(path), str(path))
