"""Read YAML or JSON files into schemas, turning every failure into a one-line `InputError`.

The error names the file and the dotted path of the field (``engine.max_num_seqs``), never a traceback.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ValidationError

from ttftsim.config.base import FIELD_ERROR, WRONG_KIND
from ttftsim.errors import InputError
from ttftsim.inputs.files import excerpt
from ttftsim.inputs.structured import load_structured

SchemaT = TypeVar("SchemaT", bound=BaseModel)


def read_mapping(path: Path, what: str = "file") -> dict[str, Any]:
    """Parse a YAML or JSON file (ttftsim/inputs: size, UTF-8, bounded YAML) that must hold a mapping."""
    data = load_structured(path, what)
    if not isinstance(data, dict):
        raise InputError(str(path), "", f"top level must be a mapping, got {_type_name(data, path)}")
    return data


# the name pydantic gives a union's member in an error's location (`limits.nvidia.com/gpu.constrained-int`):
# its own, not a field of the input
PYDANTIC_BRANCH = re.compile(
    r"^(constrained-)?(int|str|float|bool|bytes|list\[.*\]|dict\[.*\])$|^(function|lax-or-strict|json-or-python)"
    r"(-(after|before|wrap|plain))?\["
)


def _type_name(value: object, path: Path) -> str:
    """What a file's top level holds instead of a mapping (YAML reads an empty file, and `null`, as None)."""
    if value is not None:
        return type(value).__name__
    lines = (line.strip() for line in path.read_text(errors="replace").splitlines())
    written = any(line and not line.startswith("#") and line not in ("---", "...") for line in lines)
    return "null" if written else "nothing (an empty file)"


def validation_error(source: str, exc: ValidationError, schema: type[BaseModel] | None = None) -> InputError:
    """The first error of a pydantic ValidationError as an InputError (source, dotted field, message); with the
    schema, an unknown field is given the nearest field name it may have meant."""
    errors = exc.errors(include_url=False)
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    missing = [e for e in errors if e["type"] == "missing"]
    # a misspelt field explains a missing one, and a wrong value one that could not be derived from it
    # (num_attention_heads "32" in a config.json left head_dim missing): the cause first
    present = [e for e in errors if e["type"] != "missing"]
    first = unknown[0] if unknown and missing else (present or errors)[0]
    field = ".".join(str(part)[:60] for part in _written_path(schema, first["loc"]))
    message = str(first["msg"]).removeprefix("Value error, ")[:300]  # pydantic's prefix says nothing to a user
    if first["loc"][-1:] == ("[key]",):
        message = f"as a key: {message}"
    if first["type"] in (WRONG_KIND, FIELD_ERROR):  # raised for the whole model: the field is in its context
        field = ".".join(part for part in (field, str(first.get("ctx", {}).get("field", ""))) if part)
        return InputError(source, field, message)
    if first["type"] == "union_tag_invalid":
        return _unknown_variant(source, field, first.get("ctx", {}))
    if first["type"] == "union_tag_not_found":  # a tagged section without its tag
        key = str(first.get("ctx", {}).get("discriminator", "type")).strip("'")
        tags = _tags(schema, first["loc"]) if schema is not None else []
        message = f"missing: one of {', '.join(tags)}" if tags else "missing"
        return InputError(source, f"{field}.{key}" if field else key, message)
    if first["type"] == "extra_forbidden":
        siblings = [str(e["loc"][-1]) for e in missing if e["loc"][:-1] == first["loc"][:-1]]
        if not siblings and schema is not None:
            siblings = _field_names(schema, first["loc"][:-1])
        close = difflib.get_close_matches(str(first["loc"][-1]), siblings, n=1)
        message = "unknown field" + (f" (did you mean {close[0]}?)" if close else "")
    elif "input" in first and first["type"] not in ("missing",) and not isinstance(first["input"], dict):
        message = f"{message} (got {excerpt(first['input'])})"
        if isinstance(first["input"], str) and "{{" in first["input"]:
            message += "; a Helm template left unrendered: render it first (helm template)"
    return InputError(source, field, message)


# a variant named as the other family calls it: lengths are `fixed` where arrivals are `constant`
SYNONYMS = {"constant": "fixed", "fixed": "constant"}


def _unknown_variant(source: str, field: str, ctx: dict[str, Any]) -> InputError:
    """A discriminated union's unknown tag (`type: poison`): the tags it takes, and the one likely meant."""
    key = str(ctx.get("discriminator", "type")).strip("'")
    tag = str(ctx.get("tag"))
    tags = re.findall(r"'([^']*)'", str(ctx.get("expected_tags", "")))
    meant = SYNONYMS.get(tag) if SYNONYMS.get(tag) in tags else None
    meant = meant or next(iter(difflib.get_close_matches(tag, tags, n=1)), None)
    message = f"{tag!r} is not one of {', '.join(tags)}" + (f" (did you mean {meant}?)" if meant else "")
    return InputError(source, f"{field}.{key}" if field else key, message)


def _models_at(schema: type[BaseModel], loc: tuple[Any, ...]) -> list[type[BaseModel]]:
    """The models an error's location leads to (a tagged union's: its members)."""
    models: list[type[BaseModel]] = [schema]
    for part in loc:
        models, _ = _step(models, part)
    return models


def _field_names(schema: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names a model has at an error's location."""
    return sorted({name for m in _models_at(schema, loc) for name in m.model_fields})


def _tags(schema: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The tags of the tagged union at an error's location (the `type` each member takes)."""
    typed = [m.model_fields["type"] for m in _models_at(schema, loc) if "type" in m.model_fields]
    return [str(tag) for field in typed for tag in get_args(field.annotation)]


def _written_path(schema: type[BaseModel] | None, loc: tuple[Any, ...]) -> list[Any]:
    """An error's location as the file spells it: without the names pydantic gives union members, neither an
    untagged union's (`int`, `function-after[...]`) nor a tagged union's tag (`workload.synthetic.arrivals.poisson
    .rate` is `workload.arrivals.rate` in the file; told apart from a field by the schema, when given)."""
    models: list[type[BaseModel]] = [] if schema is None else [schema]
    written = []
    for part in loc:
        if PYDANTIC_BRANCH.match(str(part)) or part == "[key]":  # (a map's key: the part before it is the key)
            continue
        models, tag = _step(models, part)
        if not tag:
            written.append(part)
    return written


def _step(models: list[type[BaseModel]], part: Any) -> tuple[list[type[BaseModel]], bool]:
    """The models one step of a location leads to, and whether the step is a tagged union's tag: each step is a
    field (its type's models next) or the tag pydantic puts in the location of a tagged union member (the
    member whose `type` is that tag); an index into a list or a key of a dict leads to the same models."""
    members = [
        m
        for m in models
        if isinstance(part, str) and "type" in m.model_fields and part in get_args(m.model_fields["type"].annotation)
    ]
    if members and len(models) > 1:  # a tagged union's members: what follows its field is the tag (`stages`, the
        return members, True  # staged arrivals' tag, is also their field)
    fields = [m.model_fields[part] for m in models if isinstance(part, str) and part in m.model_fields]
    if fields:
        return [m for f in fields for m in _models_in(f.annotation)], False
    if members:
        return members, True
    return models, False


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type holds (through Optional, unions, lists, dicts, Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def parse_mapping(schema: type[SchemaT], data: dict[str, Any], source: str) -> SchemaT:
    """Validate an already-read mapping against a schema."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise validation_error(source, exc, schema) from None


def load_file(schema: type[SchemaT], path: Path) -> SchemaT:
    """Read and validate one file."""
    return parse_mapping(schema, read_mapping(path), str(path))
