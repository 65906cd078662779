"""Write a run's results to a folder: requests (Parquet and CSV), iterations (Parquet), time series (CSV),
summary (JSON), and a Prometheus exposition (metrics.prom)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd


def write_results(
    out: Path,
    requests: pd.DataFrame,
    steps: pd.DataFrame,
    series: pd.DataFrame,
    summary: dict[str, Any],
    prometheus_text: str,
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [
        out / "requests.parquet",
        out / "requests.csv",
        out / "steps.parquet",
        out / "timeseries.csv",
        out / "summary.json",
        out / "metrics.prom",
    ]
    requests.to_parquet(written[0], index=False)
    requests.to_csv(written[1], index=False)
    steps.to_parquet(written[2], index=False)
    series.to_csv(written[3], index=False)
    written[4].write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    written[5].write_text(prometheus_text, encoding="utf-8")
    return written
