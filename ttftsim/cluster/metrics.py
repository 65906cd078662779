"""What Prometheus and its adapter compute from vLLM's TTFT histogram: histogram_quantile over the
bucket counts that arrived in a rate window (serving-semantics.md 1.1 and 5)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ttftsim.metrics.prometheus import TTFT_BUCKETS

__all__ = ["TTFT_BUCKETS", "histogram_quantile"]


def histogram_quantile(q: float, bounds: Sequence[float], counts: NDArray[np.int64]) -> float:
    """Prometheus' histogram_quantile. `counts` are per bucket (not cumulative), the last one +Inf.

    The rank q x total falls in some bucket; the result interpolates linearly inside it (the first
    bucket's lower bound is 0); a rank in the +Inf bucket gives the highest finite bound; no
    observations give NaN."""
    total = int(counts.sum())
    if total == 0:
        return math.nan
    rank = q * total
    cumulative = np.cumsum(counts)
    bucket = int(np.searchsorted(cumulative, rank, side="left"))
    if bucket >= len(bounds):
        return float(bounds[-1])
    lower = 0.0 if bucket == 0 else float(bounds[bucket - 1])
    below = 0 if bucket == 0 else int(cumulative[bucket - 1])
    inside = int(counts[bucket])
    return lower + (float(bounds[bucket]) - lower) * (rank - below) / inside
