"""Time series per window: arrival rate, running and waiting requests, KV usage, prefix hit rate, and
TTFT percentiles (metrics/percentiles.py) of the requests that got their first token in the window."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from ttftsim.metrics.percentiles import percentile

WINDOW_LEVELS = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


def _percentile_of(q: float) -> Callable[[pd.Series], float]:
    """The q-percentile of one window's TTFTs (metrics/percentiles.py)."""
    return lambda values: percentile(values.dropna().to_numpy(dtype=np.float64), q)


def _window(times: pd.Series, width: float) -> pd.Series:
    starts: pd.Series = (np.floor(times / width) * width).astype(float)
    return starts


def time_series(requests: pd.DataFrame, steps: pd.DataFrame, width_s: float) -> pd.DataFrame:
    """One row per window start; gauges are averaged over the iterations that started in the window."""
    arrivals = requests.groupby(_window(requests["arrival_s"], width_s)).agg(
        arrivals=("request_id", "size"), prompt_tokens=("prompt_tokens", "sum"), cached_tokens=("cached_tokens", "sum")
    )
    arrivals["arrival_rate"] = arrivals["arrivals"] / width_s
    arrivals["hit_rate"] = arrivals["cached_tokens"] / arrivals["prompt_tokens"].where(arrivals["prompt_tokens"] > 0)
    served = requests[requests["first_token_s"].notna()]
    ttft = served.groupby(_window(served["first_token_s"], width_s))["ttft_s"]
    columns = {f"ttft_{name}_s": ttft.agg(_percentile_of(q)) for name, q in WINDOW_LEVELS.items()}
    percentiles = pd.DataFrame(columns | {"first_tokens": ttft.size()})
    gauges = (
        steps.groupby(_window(steps["time_s"], width_s)).agg(
            running=("running", "mean"),
            waiting=("waiting", "mean"),
            kv_usage=("kv_usage", "mean"),
            busy_s=("duration_s", "sum"),
            iterations=("num_steps", "sum"),
        )
        if len(steps)
        else pd.DataFrame()
    )
    frame = arrivals[["arrival_rate", "hit_rate"]].join(percentiles, how="outer").join(gauges, how="outer")
    frame.index.name = "window_start_s"
    return frame.reset_index().fillna({"arrival_rate": 0.0, "first_tokens": 0})
