"""Parse YAML and JSON input with bounds: duplicate keys refused, nesting at most `depth` levels, at most
`nodes` values once aliases are expanded (a billion-laughs document is refused from its size, computed without
expanding it), no recursive aliases, integers within 64 bits and numbers finite where the document means
finite quantities (every input file but saved results). Errors name the file, the field's dotted path and
at most a short excerpt of the value."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from ttftsim.errors import InputError
from ttftsim.inputs.files import FileKind, excerpt, read_text
from ttftsim.inputs.limits import INT64_MAX, Limits, current_limits

_YamlBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: fast, and it bounds nesting
MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: object, line: int) -> None:
        super().__init__(f"duplicate key {excerpt(key)} (line {line})")


class _StrictLoader(_YamlBase):  # type: ignore[misc]
    """The safe loader, refusing a key given twice in one mapping (merged keys, `<<`, may be overridden)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                continue
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise DuplicateKeyError(key, key_node.start_mark.line + 1)
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


# YAML 1.2's floats: PyYAML follows YAML 1.1, where an exponent needs a sign and a dot (1.0e+9), so `1e9` or
# `12.0e9` would load as strings; a number written that way is a number here (as in JSON and YAML 1.2).
_YAML12_FLOAT = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))


def _where(path: tuple[object, ...]) -> str:
    return ".".join(str(part)[:60] for part in path)


def check_tree(data: Any, source: str, limits: Limits, finite: bool = True, root: tuple[object, ...] = ()) -> None:
    """Depth, expanded size, cycles and numbers of a parsed document (iteratively: no recursion to exhaust).
    Shared sub-trees (YAML aliases) are measured once, and counted, with their height, wherever they are used."""
    measured: dict[int, tuple[int, int]] = {}  # id -> (values, height) of a finished container
    open_ids: set[int] = set()
    stack: list[tuple[Any, tuple[object, ...], bool]] = [(data, root, False)]
    while stack:
        value, path, leaving = stack.pop()
        if not isinstance(value, dict | list):
            _check_scalar(value, path, source, finite)
            continue
        ident = id(value)
        if leaving:
            open_ids.discard(ident)
            measured[ident] = _measure(value, measured)
            if measured[ident][0] > limits.nodes:
                raise InputError(source, _where(path), _too_many(limits))
            continue
        if ident in open_ids:
            raise InputError(source, _where(path), "a recursive alias (the value contains itself)")
        height = measured[ident][1] if ident in measured else 1
        if len(path) - len(root) + height > limits.depth:
            field = _where(path[:8]) + ("..." if len(path) > 8 else "")
            raise InputError(
                source, field, f"nested deeper than {limits.depth} levels ({limits.how_to_raise('depth')})"
            )
        if ident in measured:
            continue
        open_ids.add(ident)
        stack.append((value, path, True))
        for key, child in value.items() if isinstance(value, dict) else enumerate(value):
            if isinstance(value, dict):
                _check_scalar(key, (*path, "(key)"), source, finite)
            stack.append((child, (*path, key), False))


def _measure(value: dict[Any, Any] | list[Any], measured: dict[int, tuple[int, int]]) -> tuple[int, int]:
    children = value.values() if isinstance(value, dict) else value
    values, height = 1, 1
    for child in children:
        size, tall = measured.get(id(child), (1, 0)) if isinstance(child, dict | list) else (1, 0)
        values += size
        height = max(height, tall + 1)
    return values, height


def _too_many(limits: Limits) -> str:
    return f"more than {limits.nodes:,} values once aliases are expanded ({limits.how_to_raise('nodes')})"


def _check_scalar(value: Any, path: tuple[object, ...], source: str, finite: bool) -> None:
    if isinstance(value, bool):
        return
    if isinstance(value, int) and not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise InputError(source, _where(path), f"integer out of range ({excerpt(value)}; at most 64 bits)")
    if finite and isinstance(value, float) and not math.isfinite(value):
        raise InputError(source, _where(path), f"expects a finite number, got {value!r}")


def _parse_error(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        return f"{exc.context + ': ' if exc.context else ''}{exc.problem} ({where})"[:200]
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if "Exceeds the limit" in text:
        return f"a number longer than {sys.get_int_max_str_digits()} digits"
    return text[:200]


def parse_yaml_documents(text: str, source: str, limits: Limits | None = None) -> list[Any]:
    """Every document of a YAML stream (Kubernetes manifests), each checked."""
    limits = limits or current_limits()
    try:
        documents = list(yaml.load_all(text, Loader=_StrictLoader))
    except (yaml.YAMLError, ValueError, TypeError, RecursionError, OverflowError) as exc:
        helm = "; it holds {{ ... }}: a Helm template left unrendered, render it first (helm template)"
        raise InputError(source, "", f"not valid YAML: {_parse_error(exc)}{helm if '{{' in text else ''}") from None
    for index, document in enumerate(documents):
        check_tree(document, source, limits, root=(f"document {index}",) if len(documents) > 1 else ())
    return documents


def parse_yaml(text: str, source: str, limits: Limits | None = None) -> Any:
    """One YAML document, checked (a stream of several is an error)."""
    documents = parse_yaml_documents(text, source, limits)
    if len(documents) > 1:
        raise InputError(source, "", f"holds {len(documents)} YAML documents (--- separators); expected one")
    return documents[0] if documents else None


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping: dict[str, Any] = {}
    for key, value in pairs:
        if key in mapping:
            raise ValueError(f"duplicate key {excerpt(key)}")
        mapping[key] = value
    return mapping


def parse_json(text: str, source: str, limits: Limits | None = None, finite: bool = True) -> Any:
    """One JSON value, checked; NaN and Infinity are refused unless `finite` is False (saved results)."""
    limits = limits or current_limits()
    try:
        data = json.loads(text, object_pairs_hook=_refuse_duplicates)
    except (ValueError, RecursionError) as exc:
        raise InputError(source, "", f"not valid JSON: {_parse_error(exc)}") from None
    check_tree(data, source, limits, finite)
    return data


def is_json(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def load_structured(path: Path, what: str = "file", kind: FileKind = "config", finite: bool = True) -> Any:
    """A YAML or JSON file (by its suffix: .json is JSON, anything else YAML), read and checked."""
    limits = current_limits()
    text = read_text(path, kind, what, limits)
    if is_json(path):
        return parse_json(text, str(path), limits, finite)
    return parse_yaml(text, str(path), limits)
