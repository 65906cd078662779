"""The strict base model every input schema derives from: unknown fields are errors, values are frozen, and a
value of the wrong kind is an error instead of being converted.

Pydantic's lax mode turns `true` into 1 for a number, `"64"` into 64 and `"no"` into False; an input file
that says `ttft_p99_s: true` or `enable_prefix_caching: "off"` is a mistake, so a boolean or a string given
where the field admits neither is refused (its other conversions stay: an integer for a float, a list for a
tuple, which YAML and JSON cannot tell apart).
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from ttftsim.inputs.files import excerpt

_KINDS: dict[tuple[type, str], frozenset[str]] = {}  # per model and field, worked out once
# Validation context key: values parsed from a command line (vLLM arguments in a manifest) are strings that
# the program itself converts, as argparse does, so they are converted here too.
COMMAND_LINE = "command_line"
LABEL_MAX_CHARS = 200


def _label(value: str) -> str:
    if len(value) > LABEL_MAX_CHARS:
        raise ValueError(f"a label of at most {LABEL_MAX_CHARS} characters (this one has {len(value):,})")
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        raise ValueError("no control characters in a label (an escape sequence would reach the terminal)")
    return value


# a name printed in reports and terminals: no control characters, short enough for a line
Label = Annotated[
    str,
    AfterValidator(_label),
    Field(json_schema_extra={"maxLength": LABEL_MAX_CHARS, "pattern": "^[^\\u0000-\\u001f\\u007f]*$"}),
]
WRONG_KIND = "wrong_kind"  # the error type; its context names the field (config/loading.py puts it in the path)
FIELD_ERROR = "field_error"  # an error a whole model finds in one of its fields, named by its context as above


def _admits(annotation: Any) -> frozenset[str]:
    """The scalar kinds a field's annotation admits ('bool', 'str', 'number'), or 'any' when it cannot tell."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _admits(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        kinds: frozenset[str] = frozenset()
        for arg in typing.get_args(annotation):
            kinds |= _admits(arg)
        return kinds
    if origin is Literal:
        values = typing.get_args(annotation)
        return frozenset("bool" if isinstance(v, bool) else "str" if isinstance(v, str) else "number" for v in values)
    if annotation is bool:
        return frozenset({"bool"})
    if annotation in (int, float):
        return frozenset({"number"})
    if annotation is str or (isinstance(annotation, type) and issubclass(annotation, enum.Enum)):
        return frozenset({"str"})
    if annotation is type(None):
        return frozenset()
    return frozenset({"any"})  # models, lists, mappings, paths: their own validation decides


class StrictModel(BaseModel):
    """Frozen, forbids unknown fields, validates defaults, refuses NaN and infinities (every number of an
    input is a finite quantity) and values of the wrong kind; every field carries a description."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_conversion(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or (info.context or {}).get(COMMAND_LINE):
            return data
        for name, value in data.items():
            field = cls.model_fields.get(name) if isinstance(name, str) else None
            if field is None or not isinstance(value, (bool, str)):
                continue
            kinds = _KINDS.get((cls, name))
            if kinds is None:
                kinds = _KINDS[(cls, name)] = _admits(field.annotation)
            if "any" in kinds or ("bool" if isinstance(value, bool) else "str") in kinds:
                continue
            got = f"a boolean ({str(value).lower()})" if isinstance(value, bool) else f"the string {excerpt(value)}"
            raise PydanticCustomError(
                WRONG_KIND, "expected {expected}, got {got}", {"field": name, "expected": _kinds(kinds), "got": got}
            )
        return data


def _kinds(kinds: frozenset[str]) -> str:
    names = {"number": "a number", "bool": "true or false", "str": "a string"}
    return " or ".join(names[k] for k in sorted(kinds)) or "nothing"
