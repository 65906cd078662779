"""Time series per window: arrival rate, running and waiting requests, KV usage, prefix hit rate, and
TTFT percentiles of the requests that got their first token in the window."""

from __future__ import annotations

import numpy as np
import pandas as pd


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
    percentiles = pd.DataFrame(
        {
            "ttft_p50_s": ttft.quantile(0.5),
            "ttft_p90_s": ttft.quantile(0.9),
            "ttft_p99_s": ttft.quantile(0.99),
            "first_tokens": ttft.size(),
        }
    )
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
