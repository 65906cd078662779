"""Token-length samplers: fixed, uniform, bounded normal, lognormal (by mean and std), empirical."""

from __future__ import annotations

import json
import math
from pathlib import Path

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

Ints = NDArray[np.int64]


def read_empirical(spec: EmpiricalLength, base: Path) -> Ints:
    path = (base / spec.path).resolve()
    try:
        if path.suffix == ".json":
            values = np.asarray(json.loads(path.read_text()), dtype=np.int64)
        else:
            frame = pd.read_csv(path)
            column = spec.column or str(frame.columns[0])
            if column not in frame.columns:
                raise InputError(str(path), "column", f"no column {column!r} (columns: {', '.join(frame.columns)})")
            values = frame[column].to_numpy(dtype=np.int64)
    except FileNotFoundError:
        raise InputError(str(path), "", "length file not found") from None
    except (ValueError, OSError) as exc:
        raise InputError(str(path), "", f"cannot read lengths ({exc})") from None
    values = values[values > 0]
    if len(values) == 0:
        raise InputError(str(path), "", "no positive lengths in file")
    return values


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
