"""The run summary's TTFT intervals: new keys beside the unchanged percentiles."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ttftsim.config.scenario import Slo
from ttftsim.metrics.run_summary import QuantileInterval
from ttftsim.metrics.summary import BREAKDOWN, quantile_intervals, summarize


def _requests(ttft_s: list[float]) -> pd.DataFrame:
    n = len(ttft_s)
    frame = pd.DataFrame(
        {
            "status": ["finished"] * n,
            "ttft_s": ttft_s,
            "tpot_s": [0.01] * n,
            "e2e_s": [1.0] * n,
            "num_preemptions": [0] * n,
            "generated_tokens": [10] * n,
            "prompt_tokens": [100] * n,
        }
    )
    for column in BREAKDOWN:
        frame[column] = 0.0
    return frame


def test_each_ttft_percentile_gets_its_order_statistic_interval() -> None:
    ttft = [i / 1000 for i in range(100, 0, -1)]  # 1 ms .. 100 ms, unsorted
    summary = summarize(_requests(ttft), (np.array([0.01]), np.array([1.0])), Slo(), (0, 0), 10.0).to_json()
    assert set(summary["ttft_s"]) == {"mean", "p50", "p90", "p99", "p999"}  # the existing keys, unchanged
    intervals = summary["ttft_interval_s"]
    assert intervals["confidence"] == 0.95 and intervals["num_samples"] == 100
    assert intervals["p50"] | {"coverage": None} == {
        "lo": 0.040,
        "hi": 0.061,
        "rank_lo": 40,
        "rank_hi": 61,
        "coverage": None,
    }
    assert (intervals["p90"]["rank_lo"], intervals["p90"]["rank_hi"]) == (84, 96)
    assert (intervals["p90"]["lo"], intervals["p90"]["hi"]) == (0.084, 0.096)
    # 100 requests cannot pin a P99 to 95%: no upper rank leaves 2.5% above, so X(97)..X(100), whose coverage
    # is P(97 <= B <= 99) for B ~ Binomial(100, 0.99) = 0.0610 + 0.1849 + 0.3697 = 0.6156
    p99 = intervals["p99"]
    assert (p99["rank_lo"], p99["rank_hi"], p99["lo"], p99["hi"]) == (97, 100, 0.097, 0.100)
    exact = sum(math.comb(100, k) * 0.99**k * 0.01 ** (100 - k) for k in (97, 98, 99))
    assert p99["coverage"] == pytest.approx(exact, abs=1e-12)
    assert p99["coverage"] == pytest.approx(0.6156, abs=1e-4)


def test_intervals_without_enough_values() -> None:
    intervals = quantile_intervals(np.array([0.1, np.nan]))
    assert intervals.num_samples == 1
    assert intervals.p50 == QuantileInterval(None, None, None, None, None)
