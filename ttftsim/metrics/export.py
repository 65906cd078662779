"""Write a run's results to a folder: requests (Parquet and CSV), iterations (Parquet), time series (CSV),
summary (JSON), a Prometheus exposition (metrics.prom), and a cluster run's pods and HPA syncs (pods.csv: each pod's
role, node, lifecycle times and cold-start phases; hpa.csv: each sync's current, ready and desired replicas and
metric values). Written crash-safe: staged beside the folder, marked complete last, then moved into place
(ttftsim/result_folder.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ttftsim.result_folder import staged


def write_results(
    out: Path,
    requests: pd.DataFrame,
    steps: pd.DataFrame,
    series: pd.DataFrame,
    summary: dict[str, Any],
    prometheus_text: str,
    tables: dict[str, pd.DataFrame] | None = None,
) -> list[Path]:
    """`tables`: more CSV files by name (a cluster run's pods.csv and hpa.csv)."""
    names = ["requests.parquet", "requests.csv", "steps.parquet", "timeseries.csv", "summary.json", "metrics.prom"]
    tables = tables or {}
    names += list(tables)
    with staged(out, "simulation") as folder:
        for name, table in tables.items():
            table.to_csv(folder / name, index=False)
        written = [folder / name for name in names]
        requests.to_parquet(written[0], index=False)
        requests.to_csv(written[1], index=False)
        steps.to_parquet(written[2], index=False)
        series.to_csv(written[3], index=False)
        written[4].write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        written[5].write_text(prometheus_text, encoding="utf-8")
    return [out / name for name in names]
