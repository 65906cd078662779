"""The time series of a tiny run, every window and column worked out by hand: arrivals and prefix hit rate by
arrival window, TTFT percentiles by first-token window (linear interpolation, metrics/percentiles.py),
gauges averaged over the iterations that started in the window, and windows with only some of these."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ttftsim.metrics.timeseries import WINDOW_LEVELS, time_series

NAN = math.nan
COLUMNS = [
    "window_start_s",
    "arrival_rate",
    "hit_rate",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "first_tokens",
    "running",
    "waiting",
    "kv_usage",
    "busy_s",
    "iterations",
]


def _requests() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "request_id": [0, 1, 2, 3, 4],
            "arrival_s": [0.2, 0.7, 1.1, 3.5, 1.5],
            "prompt_tokens": [100, 100, 200, 0, 100],
            "cached_tokens": [50, 0, 100, 0, 0],
            "first_token_s": [0.5, 2.2, 1.4, NAN, 1.9],
            "ttft_s": [0.3, 1.5, 0.3, NAN, 0.4],
        }
    )


def _steps() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "time_s": [0.0, 0.5, 1.2],
            "duration_s": [0.5, 0.5, 0.4],
            "running": [1, 2, 2],
            "waiting": [0, 1, 0],
            "kv_usage": [0.1, 0.3, 0.5],
            "num_steps": [1, 3, 2],
        }
    )


def test_every_window_of_a_tiny_run() -> None:
    frame = time_series(_requests(), _steps(), 1.0)
    assert list(frame.columns) == COLUMNS
    expected = pd.DataFrame(
        [
            # window 0: requests 0, 1 arrive (200 prompt tokens, 50 cached); request 0's first token (0.3 s);
            # iterations at 0.0 and 0.5
            [0.0, 2.0, 0.25, 0.3, 0.3, 0.3, 1, 1.5, 0.5, 0.2, 1.0, 4],
            # window 1: requests 2, 4 arrive (300 prompt, 100 cached); their first tokens 0.3 s and 0.4 s:
            # P50 0.35, P90 0.3 + 0.9 x 0.1, P99 0.3 + 0.99 x 0.1; one iteration
            [1.0, 2.0, 1 / 3, 0.35, 0.39, 0.399, 2, 2.0, 0.0, 0.5, 0.4, 2],
            # window 2: only request 1's first token (1.5 s): no arrivals is a rate of 0
            [2.0, 0.0, NAN, 1.5, 1.5, 1.5, 1, NAN, NAN, NAN, NAN, NAN],
            # window 3: request 3 arrives with an empty prompt (no hit rate) and is never served
            [3.0, 1.0, NAN, NAN, NAN, NAN, 0, NAN, NAN, NAN, NAN, NAN],
        ],
        columns=COLUMNS,
    )
    pd.testing.assert_frame_equal(frame, expected, check_dtype=False, atol=1e-12)


def test_a_wider_window_divides_by_its_width() -> None:
    frame = time_series(_requests(), _steps(), 2.0)
    assert list(frame["window_start_s"]) == [0.0, 2.0]
    assert list(frame["arrival_rate"]) == [2.0, 0.5]  # 4 arrivals in 2 s; 1 in the next 2 s
    assert frame["hit_rate"][0] == pytest.approx(150 / 500)
    assert list(frame["first_tokens"]) == [3, 1]
    assert frame["ttft_p50_s"][0] == pytest.approx(0.3)  # of 0.3, 0.3, 0.4
    assert frame["ttft_p90_s"][0] == pytest.approx(0.38)  # position 1.8: 0.3 + 0.8 x 0.1
    assert list(frame["iterations"][:1]) == [6]
    assert frame["running"][0] == pytest.approx(5 / 3)


def test_without_iterations_there_are_no_gauge_columns() -> None:
    frame = time_series(_requests(), _steps().iloc[0:0], 1.0)
    assert list(frame.columns) == COLUMNS[:7]
    assert list(frame["window_start_s"]) == [0.0, 1.0, 2.0, 3.0]
    assert list(frame["first_tokens"]) == [1, 2, 1, 0]


def test_a_window_with_only_iterations_and_one_with_a_one_token_prompt() -> None:
    requests = pd.DataFrame(
        {
            "request_id": [0],
            "arrival_s": [0.5],
            "prompt_tokens": [1],
            "cached_tokens": [1],
            "first_token_s": [0.6],
            "ttft_s": [0.1],
        }
    )
    steps = _steps().iloc[:1].assign(time_s=[2.5])  # an iteration in window 2, where nothing else happened
    frame = time_series(requests, steps, 1.0)
    assert list(frame["window_start_s"]) == [0.0, 2.0]
    assert frame["hit_rate"][0] == 1.0  # the one prompt token was cached
    assert list(frame["arrival_rate"]) == [1.0, 0.0] and list(frame["iterations"].fillna(0)) == [0, 1]


def test_the_window_percentile_levels() -> None:
    assert WINDOW_LEVELS == {"p50": 0.5, "p90": 0.9, "p99": 0.99}
