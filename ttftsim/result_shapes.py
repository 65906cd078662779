"""What a saved result must hold for the dashboard's and the report's figures and tables, checked when it is
loaded: a malformed result (hand-edited, truncated by another tool, from another version) becomes one
ValueError naming the field, never an exception in the middle of drawing a figure. Only the fields the
views read are checked; everything else in the files is left alone."""

from __future__ import annotations

from typing import Any

import pandas as pd

PERCENTILES = ("p50", "p90", "p99", "p999")
PLAN_NUMBERS = (  # each optional: plans written before a field show what they have
    *("cost_per_hour", "ttft_p50_s", "ttft_p99_s", "replicas", "gpus", "headroom"),
    *("tpot_mean_s", "tpot_p99_s", "cost_per_million_tokens", "output_tokens_per_s", "max_rate", "lower_bound_cost"),
)
ACCURACY_METRICS = ("ttft_p50", "ttft_p90", "ttft_p99")
ACCURACY_FIGURES = ("median_ape", "p90_ape", "max_ape", "stages")


def check_summary(summary: dict[str, Any]) -> None:
    """summary.json: TTFT percentiles, request counts, the TTFT breakdown, the SLO and config if present."""
    _numbers(summary.get("ttft_s"), "ttft_s", PERCENTILES)
    _numbers(summary.get("requests"), "requests", ("arrived", "finished"), nullable=False)
    breakdown = _object(summary.get("ttft_breakdown_mean_s"), "ttft_breakdown_mean_s")
    _numbers(breakdown, "ttft_breakdown_mean_s", tuple(breakdown))
    _numbers(summary.get("slo") or {}, "slo", ("ttft_p99_s",), required=False)
    if summary.get("config") is not None:
        _object(summary["config"], "config")


def check_frames(requests: pd.DataFrame, series: pd.DataFrame) -> None:
    """requests.parquet has a numeric ttft_s column; every column of timeseries.csv is numeric."""
    if "ttft_s" not in requests.columns or not pd.api.types.is_numeric_dtype(requests["ttft_s"]):
        raise ValueError("requests.parquet: no numeric ttft_s column")
    text = [str(c) for c in series.columns if not pd.api.types.is_numeric_dtype(series[c])]
    if text:
        raise ValueError(f"timeseries.csv: columns that are not numbers: {', '.join(text)}")


def check_plan(plan: dict[str, Any]) -> None:
    """plan.json: the ranked candidates (label, status, numbers), the Pareto front, each GPU type's best, the
    winner, the SLO."""
    for index, row in enumerate(_records(plan.get("ranked"), "ranked")):
        _numbers(row, f"ranked.{index}", PLAN_NUMBERS, required=False)
        _strings(row, f"ranked.{index}", ("label", "status"))
    for index, row in enumerate(_records(plan.get("pareto", []), "pareto")):
        _strings(row, f"pareto.{index}", ("label",))
    for gpu, row in _object(plan.get("best_per_gpu") or {}, "best_per_gpu").items():
        _numbers(row, f"best_per_gpu.{gpu}", PLAN_NUMBERS, required=False)
        _strings(row, f"best_per_gpu.{gpu}", ("label", "status"))
    if plan.get("winner") is not None:
        _numbers(plan["winner"], "winner", ("cost_per_hour", "ttft_p99_s"))
        _numbers(plan["winner"], "winner", PLAN_NUMBERS, required=False)
    _numbers(plan.get("slo") or {}, "slo", ("ttft_p99_s",), required=False)


def check_accuracy(report: dict[str, Any]) -> None:
    """An accuracy report: stages (case, stage, measured and predicted percentiles) and summary metrics."""
    for index, stage in enumerate(_records(report.get("stages"), "stages")):
        _strings(stage, f"stages.{index}", ("case", "stage"), types=(str, int, float))
        for side in ("measured", "predicted"):
            _numbers(stage.get(side) or {}, f"stages.{index}.{side}", ACCURACY_METRICS, required=False)
    summary = _object(report.get("summary") or {}, "summary")
    for name, figures in _object(summary.get("metrics") or {}, "summary.metrics").items():
        _numbers(figures, f"summary.metrics.{name}", ACCURACY_FIGURES, required=False)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), type(value).__name__
    )


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {_kind(value)}")
    return value


def _records(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ValueError(f"{where}: expected a list of objects")
    return value


def _numbers(value: Any, where: str, keys: tuple[str, ...], *, required: bool = True, nullable: bool = True) -> None:
    """Each key holds a number, or null when nullable; a key that is absent is an error when required."""
    data = _object(value, where)
    for key in keys:
        if key not in data:
            if required:
                raise ValueError(f"{where}.{key}: missing")
            continue
        item = data[key]
        if item is None and nullable:
            continue
        if isinstance(item, bool) or not isinstance(item, int | float):
            raise ValueError(f"{where}.{key}: expected a number, got {_kind(item)}")


def _strings(data: dict[str, Any], where: str, keys: tuple[str, ...], types: tuple[type, ...] = (str,)) -> None:
    for key in keys:
        if not isinstance(data.get(key), types) or isinstance(data.get(key), bool):
            raise ValueError(f"{where}.{key}: expected text, got {_kind(data.get(key))}")
