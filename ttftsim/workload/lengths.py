"""Token-length samplers: fixed, uniform, bounded normal, lognormal (by mean and std), empirical."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from ttftsim.config.workload import (
    EmpiricalLength,
    FixedLength,
    LengthDist,
    LognormalLength,
    NormalLength,
    UniformLength,
)
from ttftsim.errors import InputError
from ttftsim.inputs.files import excerpt, read_text
from ttftsim.inputs.limits import Limits, current_limits
from ttftsim.inputs.structured import is_json, parse_json

Ints = NDArray[np.int64]


def read_empirical(spec: EmpiricalLength, base: Path) -> Ints:
    """Observed lengths from a JSON list or a CSV column (ttftsim/inputs: a regular UTF-8 file within the
    trace size limit): every value a whole number of tokens, 1 to the token limit."""
    path = (base / spec.path).resolve()
    source, limits = str(path), current_limits()
    text = read_text(path, "trace", "length file", limits)
    if is_json(path):
        data = parse_json(text, source, limits)
        if not isinstance(data, list):
            raise InputError(source, "", f"expected a JSON list of lengths, got {type(data).__name__}")
        return _checked_lengths(data, source, "item {}", 0, limits)
    frame = _csv(text, source)
    if spec.column is None and all(_number(name) is not None for name in frame.columns):
        # no header: the first line is a length already (a column of numbers as a tool writes it)
        return _checked_lengths(_csv(text, source, header=None)[0].tolist(), source, "line {}", 1, limits)
    field = spec.column or str(frame.columns[0])
    if field not in frame.columns:
        found = ", ".join(excerpt(c, 20) for c in frame.columns[:8])
        raise InputError(source, "column", f"no column {excerpt(field)} (columns: {found})")
    return _checked_lengths(frame[field].tolist(), source, "line {} " + field, 2, limits)  # line 1: the header


def _csv(text: str, source: str, header: int | None = 0) -> pd.DataFrame:
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, header=header)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise InputError(source, "", f"not a CSV of lengths ({str(exc).strip()[:120]})") from None


def _checked_lengths(raw: list[Any], source: str, where: str, first: int, limits: Limits) -> Ints:
    """Every value a whole number of tokens in [1, limits.tokens]; `where` names a value by its number, the
    first being `first` (an item of a JSON list from 0, a CSV's line from 1)."""
    if not raw:
        raise InputError(source, "", "no lengths in the file")
    for index, value in enumerate(raw):
        number = _number(value)
        if number is None or number != int(number) or not 1 <= number <= limits.tokens:
            why = "not a whole number" if number is None or number != int(number) else "outside 1 to the token limit"
            hint = f" ({limits.how_to_raise('tokens')})" if number is not None and number > limits.tokens else ""
            raise InputError(source, where.format(first + index), f"{why}: {excerpt(value)}{hint}")
    return np.asarray([int(_number(v) or 0) for v in raw], dtype=np.int64)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def sample_lengths(spec: LengthDist, rng: np.random.Generator, count: int, base: Path = Path()) -> Ints:
    """`count` lengths, each >= 1."""
    if isinstance(spec, FixedLength):
        return np.full(count, spec.value, dtype=np.int64)
    if isinstance(spec, UniformLength):
        return rng.integers(spec.low, spec.high + 1, count, dtype=np.int64)
    if isinstance(spec, NormalLength):
        values = np.rint(rng.normal(spec.mean, spec.std, count))
        return np.clip(values, spec.low, spec.high).astype(np.int64)
    if isinstance(spec, LognormalLength):
        sigma2 = math.log(1 + (spec.std / spec.mean) ** 2)
        mu = math.log(spec.mean) - sigma2 / 2
        values = np.rint(rng.lognormal(mu, math.sqrt(sigma2), count))
        return np.clip(values, spec.low, spec.high).astype(np.int64)
    observed = read_empirical(spec, base)
    return rng.choice(observed, count, replace=True)
