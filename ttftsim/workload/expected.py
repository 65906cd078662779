"""What a workload asks for on average, from its specification rather than from one run's sample: the expected
length of each length distribution as workload/lengths.py draws it (rounded, then clipped), and the output tokens
per unit of a plan's rate. A plan prices every candidate at the same demand with these, where each run's own
sample of lengths would differ by its size and seed. Left out: what a deployment fails to serve (refusals,
aborts): that is the runs' business, not the demand's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy import integrate, stats

from ttftsim.config.workload import (
    ConversationWorkload,
    EmpiricalLength,
    FixedLength,
    LengthDist,
    LognormalLength,
    SharedPrefixWorkload,
    SyntheticWorkload,
    TraceWorkload,
    UniformLength,
    Workload,
)
from ttftsim.workload.lengths import read_empirical
from ttftsim.workload.traces import window_requests

TAIL = 1e-15  # a tail probability below this changes an expected length by under a millionth of a token
SUMMED = 1 << 22  # terms summed one by one (32 MB of doubles); the rest of a longer tail is integrated


def expected_length(spec: LengthDist, base: Path) -> float:
    """The mean of the lengths `sample_lengths` draws from `spec`: exact for fixed and uniform, the file's mean
    for an empirical distribution, and for normal and lognormal the mean after rounding and clipping (which
    moves it from the parameter `mean` when the clip cuts a tail)."""
    if isinstance(spec, FixedLength):
        return float(spec.value)
    if isinstance(spec, UniformLength):
        return (spec.low + spec.high) / 2
    if isinstance(spec, EmpiricalLength):
        return float(read_empirical(spec, base).mean())
    if isinstance(spec, LognormalLength):
        sigma2 = math.log(1 + (spec.std / spec.mean) ** 2)  # as lengths.py parametrises it
        dist = stats.lognorm(s=math.sqrt(sigma2), scale=math.exp(math.log(spec.mean) - sigma2 / 2))
    elif spec.std == 0:
        return float(min(max(np.rint(spec.mean), spec.low), spec.high))
    else:
        dist = stats.norm(loc=spec.mean, scale=spec.std)
    return _rounded_clipped_mean(dist, spec.low, spec.high)


def _rounded_clipped_mean(dist: Any, low: int, high: int) -> float:
    """E[clip(rint(X), low, high)] = low + sum over k = low .. high - 1 of P(X > k + 1/2): each whole length
    above low counts once for every draw that reaches it. Terms where P is within TAIL of 1 (below the bulk) or
    of 0 (above it) are counted as 1 and 0. Past SUMMED terms (a heavy tail barely clipped: turns of mean 5 and
    std 500 reach 1e-15 only at 1.5e9) the sum is the integral of P(X > x) (each term is P's midpoint over its unit
    interval, and P changes by a tiny fraction per unit out there), not an array of that length."""
    first = min(max(low, math.floor(dist.ppf(TAIL))), high)
    last = min(max(first, math.ceil(dist.isf(TAIL))), high)
    stop = min(last, first + SUMMED)
    lengths = np.arange(first, stop, dtype=np.float64)
    mean: float = first + float(dist.sf(lengths + 0.5).sum())  # the terms from low to first are 1 each
    if last > stop:
        mean += float(integrate.quad(dist.sf, stop, last, limit=200)[0])
    return mean


def output_tokens_per_unit(workload: Workload, base: Path) -> float:
    """Output tokens asked for per unit of a plan's rate: per request, or per conversation for a conversation
    workload (its rate is of conversations, each asking turns x answer tokens); for a trace, the mean over its
    window's rows, those its rate is measured on (traces.window_requests; every row asks for at least one token,
    as it is replayed)."""
    if isinstance(workload, SyntheticWorkload):
        return expected_length(workload.output_tokens, base)
    if isinstance(workload, SharedPrefixWorkload):
        return float(workload.output_len)
    if isinstance(workload, ConversationWorkload):
        return expected_length(workload.turns, base) * expected_length(workload.output_tokens, base)
    assert isinstance(workload, TraceWorkload)
    requests = window_requests(workload, base)
    return float(np.mean([r.output_tokens for r in requests])) if requests else 0.0
