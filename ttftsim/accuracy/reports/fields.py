"""Typed access to a parsed report's fields: every read names the file and the field's dotted path when the
field is missing or of the wrong type, so a truncated or edited report is one line, never a KeyError.

Numbers are finite ints or floats (bool is not a number); counts are whole and not negative; times (latencies,
their means and percentiles) and send times (clock readings) are numbers that are not negative."""

from __future__ import annotations

import math
from typing import Any

from ttftsim.errors import InputError
from ttftsim.inputs.files import excerpt
from ttftsim.inputs.limits import current_limits

_MISSING = object()


class Fields:
    """A JSON object of one report, with the path that led to it (for errors)."""

    def __init__(self, source: str, data: object, path: str = "") -> None:
        self.source, self.path = source, path
        if not isinstance(data, dict):
            raise self.error("", f"expected an object, got {_kind(data)}")
        self.data: dict[str, Any] = data

    def where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path and key else (self.path or key)

    def error(self, key: str, message: str) -> InputError:
        return InputError(self.source, self.where(key), message)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING or value is None:
            raise self.error(key, "missing from the report")
        return value

    def number(self, key: str) -> float:
        return as_number(self.raw(key), self, key)

    def optional_number(self, key: str) -> float | None:
        return None if not self.has(key) else self.number(key)

    def time(self, key: str) -> float:
        """A latency, or a statistic of latencies: a number that is not negative."""
        return as_time(self.raw(key), self, key)

    def send_time(self, key: str) -> float:
        """When a request was sent, a clock reading: a number that is not negative."""
        return as_send_time(self.raw(key), self, key)

    def count(self, key: str) -> int:
        return as_count(self.raw(key), self, key)

    def text(self, key: str) -> str:
        value = self.raw(key)
        if not isinstance(value, str):
            raise self.error(key, f"expected text, got {_kind(value)}")
        return value

    def child(self, key: str) -> Fields:
        return Fields(self.source, self.raw(key), self.where(key))

    def items(self, key: str) -> list[Any]:
        value = self.raw(key)
        if not isinstance(value, list):
            raise self.error(key, f"expected a list, got {_kind(value)}")
        return value

    def children(self, key: str) -> list[Fields]:
        return [Fields(self.source, item, f"{self.where(key)}[{i}]") for i, item in enumerate(self.items(key))]

    def numbers(self, key: str, length: int | None = None) -> list[float]:
        """A list of numbers (None items are refused), of `length` items when given."""
        values = self.items(key)
        if length is not None and len(values) != length:
            raise self.error(key, f"expected {length} items (one per request), got {len(values)}")
        return [as_number(v, self, f"{key}[{i}]") for i, v in enumerate(values)]

    def times(self, key: str, length: int | None = None) -> list[float]:
        """A list of latencies (numbers that are not negative), of `length` items when given."""
        values = self.numbers(key, length)
        for i, value in enumerate(values):
            if value < 0:
                raise self.error(f"{key}[{i}]", f"a latency cannot be negative, got {value:g}")
        return values

    def send_times(self, key: str, length: int | None = None) -> list[float]:
        """A list of send times (numbers that are not negative), of `length` items when given."""
        return [as_send_time(v, self, f"{key}[{i}]") for i, v in enumerate(self.numbers(key, length))]

    def counts(self, key: str, length: int | None = None, least: int = 0) -> list[int]:
        """A list of token counts: whole numbers, at least `least`, of `length` items when given."""
        return [round(v) for v in self._whole(key, length, least)]

    def _whole(self, key: str, length: int | None, least: int) -> list[float]:
        values = self.numbers(key, length)
        limits = current_limits()
        for i, value in enumerate(values):
            if value < least or value != math.floor(value):
                raise self.error(f"{key}[{i}]", f"expected a whole number of tokens >= {least}, got {value:g}")
            if value > limits.tokens:  # here, not later in the trace made from the report (a file the user never saw)
                raise self.error(
                    f"{key}[{i}]", f"{value:,.0f} tokens, beyond the limit of {limits.tokens:,} "
                    f"({limits.how_to_raise('tokens')})",
                )  # fmt: skip
        return values


def as_number(value: object, fields: Fields, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fields.error(key, f"expected a number, got {_kind(value)}")
    if not math.isfinite(value):
        raise fields.error(key, f"expected a finite number, got {value!r}")
    return float(value)


def as_time(value: object, fields: Fields, key: str) -> float:
    number = as_number(value, fields, key)
    if number < 0:
        raise fields.error(key, f"a latency cannot be negative, got {number:g}")
    return number


def as_send_time(value: object, fields: Fields, key: str) -> float:
    number = as_number(value, fields, key)
    if number < 0:
        raise fields.error(key, f"a send time cannot be negative, got {number:g}")
    return number


def as_count(value: object, fields: Fields, key: str) -> int:
    number = as_number(value, fields, key)
    if number < 0 or number != math.floor(number):
        raise fields.error(key, f"expected a whole count >= 0, got {number:g}")
    return int(number)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, str):
        return f"text ({excerpt(value)})"
    if isinstance(value, int | float):
        return f"a number ({excerpt(value)})"
    return excerpt(value)
