"""Typed reads of fields from a YAML mapping that is not a Kubernetes object (a chart's values, a custom
resource's spec), for the readers of ttftsim/validate/formats.py. A field of the wrong type is one InputError
naming the file and the field's dotted path, never an exception in the middle of a reader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttftsim.errors import InputError


@dataclass(frozen=True)
class Fields:
    """One mapping of a YAML document, where it came from (file#document) and its path in the document."""

    source: str
    path: str
    data: dict[str, Any]

    @staticmethod
    def of(source: str, path: str, value: Any) -> Fields:
        if value is None:
            return Fields(source, path, {})
        if not isinstance(value, dict):
            raise InputError(source, path, f"a mapping is expected, not {type(value).__name__}")
        return Fields(source, path, value)

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.data and self.data[key] is not None

    def mapping(self, key: str) -> Fields:
        return Fields.of(self.source, self.where(key), self.data.get(key))

    def mappings(self, key: str) -> list[Fields]:
        """A list of mappings (modelSpec, containers); absent is empty."""
        return [Fields.of(self.source, f"{self.where(key)}.{i}", item) for i, item in enumerate(self.items(key))]

    def items(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise InputError(self.source, self.where(key), f"a list is expected, not {type(value).__name__}")
        return value

    def words(self, key: str) -> list[str]:
        """A list of command-line words (args, extraArgs); numbers written unquoted are their text."""
        out = []
        for index, item in enumerate(self.items(key)):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise InputError(self.source, f"{self.where(key)}.{index}", "a string is expected")
            out.append(str(item))
        return out

    def text(self, key: str, default: str | None = None) -> str | None:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InputError(self.source, self.where(key), f"a string is expected, not {type(value).__name__}")
        return str(value)

    def count(self, key: str, default: int) -> int:
        """A whole number >= 0; digits in a string are read as Helm's `int` reads them."""
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(self.source, self.where(key), f"a whole number >= 0 is expected, not {value!r}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            boolean_word = isinstance(value, str) and value.strip().lower() in (
                "true",
                "false",
                "yes",
                "no",
                "on",
                "off",
            )
            quoted = " (quoted: a chart's `if` takes any non-empty string as true)" if boolean_word else ""
            raise InputError(self.source, self.where(key), f"true or false is expected, not {value!r}{quoted}")
        return value
