"""Open-loop arrival times: Poisson, constant, Gamma and Weibull renewal processes with a given CV, rate
stages one after another (evenly spaced, Poisson, or drawn as inference-perf's load timers draw them), and
Poisson with a piecewise-linear rate curve (by thinning)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from ttftsim.config.workload import (
    ConstantArrivals,
    GammaArrivals,
    OpenArrivals,
    PoissonArrivals,
    RateCurveArrivals,
    StagedArrivals,
    WeibullArrivals,
)

Times = NDArray[np.float64]


def weibull_shape_for_cv(cv: float) -> float:
    """Weibull shape k whose coefficient of variation is cv: cv^2 = G(1+2/k)/G(1+1/k)^2 - 1."""
    from scipy import optimize, special  # imported here: scipy costs ~0.5 s at start-up

    def gap(k: float) -> float:
        return math.sqrt(special.gamma(1 + 2 / k) / special.gamma(1 + 1 / k) ** 2 - 1) - cv

    return float(optimize.brentq(gap, 0.05, 100.0))


def _renewal(draw: Callable[[int], Times], rng: np.random.Generator, limit_s: float, count: int | None) -> Times:
    """Cumulative sums of i.i.d. gaps until limit_s or count arrivals; the first arrival is one gap in."""
    if count is not None:
        times = np.cumsum(draw(count))
        return times[times < limit_s] if math.isfinite(limit_s) else times
    chunks, now = [], 0.0
    while now < limit_s:
        chunk = now + np.cumsum(draw(4096))
        chunks.append(chunk)
        now = float(chunk[-1])
    times = np.concatenate(chunks)
    return times[times < limit_s]


def _exponential(rng: np.random.Generator, rate: float) -> Callable[[int], Times]:
    def draw(count: int) -> Times:
        return rng.exponential(1 / rate, count)

    return draw


def scaled_exponential(rng: np.random.Generator, count: int, span_s: float) -> Times:
    """inference-perf's ConstantLoadTimer (kubernetes-sigs/inference-perf loadgen/load_timer.py, the same from
    fc877d3, February 2026, to 0.7.0): `count` exponential gaps of mean span/count, scaled so that they add up
    to span_s. The sends are the gaps' partial sums; here each is taken one gap earlier (the first at 0, the
    last one gap before span_s), so a stage's sends stay inside its window. Not evenly spaced: given their
    number, they fall as a Poisson process's do (uniform order statistics)."""
    if count <= 0:
        return np.empty(0, dtype=np.float64)
    gaps = rng.exponential(span_s / count, count)
    return np.concatenate(([0.0], np.cumsum(gaps[:-1]))) * (span_s / float(gaps.sum()))


def _inference_perf_poisson(rng: np.random.Generator, rate: float, count: int) -> Times:
    """inference-perf's PoissonLoadTimer: each second a Poisson(rate) count of sends, spread over the second
    by scaled_exponential; the stage sends its first `count` of them (the stage keeps those before its end,
    as for every process; the tool would send the few after it too). Drawn second by non-empty second (the
    empty ones between are a geometric skip, the count of a non-empty one a zero-truncated Poisson), so the
    work is one step per non-empty second however low the rate."""
    parts, second, sent = [], -1.0, 0
    non_empty = -math.expm1(-rate)  # P(a second has at least one send)
    while sent < count:
        second += float(rng.geometric(non_empty))
        in_second = _zero_truncated_poisson(rng, rate)
        parts.append(second + scaled_exponential(rng, in_second, 1.0))
        sent += in_second
    return np.concatenate(parts)[:count] if parts else np.empty(0, dtype=np.float64)


def _zero_truncated_poisson(rng: np.random.Generator, rate: float) -> int:
    """A Poisson(rate) count given that it is at least 1: by inverting its distribution function, or, where
    a count of 0 is rarer than 1e-8 (and e^-rate would underflow further on), by drawing again after a 0."""
    if rate > 20.0:
        while True:
            k = int(rng.poisson(rate))
            if k > 0:
                return k
    u = float(rng.random())
    k, p = 1, rate * math.exp(-rate) / -math.expm1(-rate)
    cumulative = p
    while u > cumulative and p > 0:
        k += 1
        p *= rate / k
        cumulative += p
    return k


def _staged(spec: StagedArrivals, rng: np.random.Generator) -> Times:
    parts, start = [], 0.0
    for stage in spec.stages:
        if spec.process == "constant":
            count = math.ceil(stage.rate * stage.duration_s - 1e-9)
            times = start + np.arange(count) / stage.rate
        elif spec.process == "inference-perf-constant":  # int(rate x duration) sends, as the tool's run_stage
            times = start + scaled_exponential(rng, int(stage.rate * stage.duration_s), stage.duration_s)
        elif spec.process == "inference-perf-poisson":
            times = start + _inference_perf_poisson(rng, stage.rate, int(stage.rate * stage.duration_s))
        else:
            times = start + _renewal(_exponential(rng, stage.rate), rng, stage.duration_s, None)
        parts.append(times[times < start + stage.duration_s])
        start += stage.duration_s
    return np.concatenate(parts)


def _rate_curve(spec: RateCurveArrivals, rng: np.random.Generator, limit_s: float, count: int | None) -> Times:
    points = np.asarray(spec.points, dtype=np.float64)
    period = float(points[-1, 0])
    peak = float(points[:, 1].max())
    horizon = limit_s if math.isfinite(limit_s) else (period if not spec.repeat else float("inf"))
    candidates = _renewal(
        lambda n: rng.exponential(1 / peak, n), rng, horizon, None if math.isfinite(horizon) else 4 * (count or 1)
    )
    phase = np.mod(candidates, period) if spec.repeat else np.minimum(candidates, period)
    rates = np.interp(phase, points[:, 0], points[:, 1])
    kept = candidates[rng.random(len(candidates)) * peak < rates]
    if not spec.repeat:
        kept = kept[kept < period]
    return kept[:count] if count is not None else kept


def arrival_times(
    spec: OpenArrivals, rng: np.random.Generator, duration_s: float | None, num_requests: int | None
) -> Times:
    """Arrival times in seconds from 0, at most num_requests of them and all before duration_s."""
    limit = duration_s if duration_s is not None else float("inf")
    if isinstance(spec, StagedArrivals):
        times = _staged(spec, rng)
        times = times[times < limit]
    elif isinstance(spec, RateCurveArrivals):
        times = _rate_curve(spec, rng, limit, num_requests)
    elif isinstance(spec, ConstantArrivals):
        count = num_requests if num_requests is not None else math.ceil(spec.rate * limit - 1e-9)
        times = np.arange(count) / spec.rate
        times = times[times < limit]
    elif isinstance(spec, PoissonArrivals):
        times = _renewal(lambda n: rng.exponential(1 / spec.rate, n), rng, limit, num_requests)
    elif isinstance(spec, GammaArrivals):
        shape = 1 / spec.cv**2
        times = _renewal(lambda n: rng.gamma(shape, 1 / (spec.rate * shape), n), rng, limit, num_requests)
    else:
        assert isinstance(spec, WeibullArrivals)
        k = weibull_shape_for_cv(spec.cv)
        scale = 1 / (spec.rate * math.gamma(1 + 1 / k))
        times = _renewal(lambda n: scale * rng.weibull(k, n), rng, limit, num_requests)
    return times[:num_requests] if num_requests is not None else times
