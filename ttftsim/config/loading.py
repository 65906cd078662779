"""Read YAML or JSON files into schemas, turning every failure into a one-line `InputError`.

The error names the file and the dotted path of the field (``engine.max_num_seqs``), never a traceback.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ttftsim.config.base import WRONG_KIND
from ttftsim.errors import InputError
from ttftsim.inputs.files import excerpt
from ttftsim.inputs.structured import load_structured

SchemaT = TypeVar("SchemaT", bound=BaseModel)


def read_mapping(path: Path, what: str = "file") -> dict[str, Any]:
    """Parse a YAML or JSON file (ttftsim/inputs: size, UTF-8, bounded YAML) that must hold a mapping."""
    data = load_structured(path, what)
    if not isinstance(data, dict):
        raise InputError(str(path), "", f"top level must be a mapping, got {_type_name(data)}")
    return data


def _type_name(value: object) -> str:
    return "nothing (an empty file)" if value is None else type(value).__name__


def validation_error(source: str, exc: ValidationError) -> InputError:
    """The first error of a pydantic ValidationError as an InputError (source, dotted field, message)."""
    errors = exc.errors(include_url=False)
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    missing = [e for e in errors if e["type"] == "missing"]
    # a misspelt field explains a missing one, and a wrong value one that could not be derived from it
    # (num_attention_heads "32" in a config.json left head_dim missing): the cause first
    present = [e for e in errors if e["type"] != "missing"]
    first = unknown[0] if unknown and missing else (present or errors)[0]
    field = ".".join(str(part)[:60] for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")[:300]  # pydantic's prefix says nothing to a user
    if first["type"] == WRONG_KIND:  # raised for the whole model: the field is in its context
        field = ".".join(part for part in (field, str(first.get("ctx", {}).get("field", ""))) if part)
        return InputError(source, field, message)
    if first["type"] == "extra_forbidden":
        siblings = [str(e["loc"][-1]) for e in missing if e["loc"][:-1] == first["loc"][:-1]]
        close = difflib.get_close_matches(str(first["loc"][-1]), siblings, n=1)
        message = "unknown field" + (f" (did you mean {close[0]}?)" if close else "")
    elif "input" in first and first["type"] not in ("missing",) and not isinstance(first["input"], dict):
        message = f"{message} (got {excerpt(first['input'])})"
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
