"""Plotly figures of a simulation, a plan, a comparison and the accuracy report: shared by the dashboard
(web/) and `ttftsim report`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ttftsim.metrics.percentiles import percentile
from ttftsim.metrics.summary import BREAKDOWN

PERCENTILES = {"P50": 0.5, "P90": 0.9, "P99": 0.99}


def ttft_distribution(requests: pd.DataFrame, slo_s: float | None, title: str = "TTFT") -> go.Figure:
    """Histogram and CDF of TTFT (ms) with P50/P90/P99 and the SLO line."""
    ttft = requests["ttft_s"].dropna().to_numpy(dtype=np.float64) * 1e3
    fig = make_subplots(rows=1, cols=2, subplot_titles=("histogram", "CDF"))
    fig.add_trace(go.Histogram(x=ttft, nbinsx=60, name="requests"), row=1, col=1)
    ordered = np.sort(ttft)
    if len(ordered):
        fig.add_trace(
            go.Scatter(x=ordered, y=np.arange(1, len(ordered) + 1) / len(ordered), mode="lines", name="CDF"),
            row=1,
            col=2,
        )
        for label, q in PERCENTILES.items():
            value = percentile(ordered, q)
            for col in (1, 2):
                fig.add_vline(x=value, line_dash="dot", line_color="gray", row=1, col=col)
            fig.add_annotation(x=value, y=q, text=f"{label} {value:,.0f} ms", showarrow=False, row=1, col=2, yshift=10)
    if slo_s is not None:
        for col in (1, 2):
            fig.add_vline(x=slo_s * 1e3, line_color="red", row=1, col=col)
        fig.add_annotation(x=slo_s * 1e3, y=1.0, text="SLO", showarrow=False, row=1, col=2, font={"color": "red"})
    fig.update_xaxes(title_text="TTFT (ms)")
    fig.update_layout(title=title, showlegend=False, height=380, margin={"t": 60, "b": 40})
    return fig


def ttft_breakdown(summary: dict[str, Any], title: str = "Where TTFT goes (mean)") -> go.Figure:
    parts = summary.get("ttft_breakdown_mean_s", {})
    names = [k.removesuffix("_s") for k in BREAKDOWN if parts.get(k) is not None]
    values = [parts[k] * 1e3 for k in BREAKDOWN if parts.get(k) is not None]
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", text=[f"{v:,.1f} ms" for v in values]))
    fig.update_layout(title=title, xaxis_title="ms", height=300, margin={"t": 50, "b": 40})
    return fig


def time_series(series: pd.DataFrame, slo_s: float | None) -> go.Figure:
    """Arrival rate, running and waiting, KV usage and hit rate, TTFT P99 per window (and pods, for a
    cluster)."""
    cluster = "pods_ready" in series.columns
    rows = 5 if cluster else 4
    titles = ["arrival rate (req/s)", "running / waiting", "KV usage / prefix hit rate", "TTFT P99 per window (ms)"]
    if cluster:
        titles.append("replicas and pods")
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.05)
    t = series.get("window_start_s", series.index)
    _line(fig, t, series, "arrival_rate", 1)
    _line(fig, t, series, "running", 2)
    _line(fig, t, series, "waiting", 2)
    _line(fig, t, series, "kv_usage", 3)
    _line(fig, t, series, "hit_rate", 3)
    if "ttft_p99_s" in series:
        fig.add_trace(
            go.Scatter(x=t, y=series["ttft_p99_s"] * 1e3, name="TTFT P99", mode="lines+markers"), row=4, col=1
        )
    if slo_s is not None:
        fig.add_hline(y=slo_s * 1e3, line_color="red", row=4, col=1)
    if cluster:
        for column in ("desired_replicas", "pods_ready", "pods_starting", "pods_pending", "pods_warm"):
            _line(fig, t, series, column, 5)
    fig.update_xaxes(title_text="time (s)", row=rows, col=1)
    fig.update_layout(height=220 * rows, title="Over time", margin={"t": 60, "b": 40})
    return fig


def _line(fig: go.Figure, t: Any, series: pd.DataFrame, column: str, row: int) -> None:
    if column in series:
        fig.add_trace(go.Scatter(x=t, y=series[column], name=column, mode="lines"), row=row, col=1)


def plan_scatter(plan: dict[str, Any]) -> go.Figure:
    """Candidates' cost per hour against P99 TTFT, the Pareto front highlighted, the winner starred."""
    rows = [r for r in plan.get("ranked", []) if r.get("cost_per_hour") is not None and r.get("ttft_p99_s")]
    front = {r["label"] for r in plan.get("pareto", [])}
    fig = go.Figure()
    for status in sorted({r["status"] for r in rows}):
        chosen = [r for r in rows if r["status"] == status]
        fig.add_trace(
            go.Scatter(
                x=[r["cost_per_hour"] for r in chosen],
                y=[r["ttft_p99_s"] * 1e3 for r in chosen],
                mode="markers",
                name=status,
                text=[r["label"] for r in chosen],
                marker={"size": 10},
            )
        )
    pareto = sorted((r for r in rows if r["label"] in front), key=lambda r: r["cost_per_hour"])
    if pareto:
        fig.add_trace(
            go.Scatter(
                x=[r["cost_per_hour"] for r in pareto],
                y=[r["ttft_p99_s"] * 1e3 for r in pareto],
                mode="lines+markers",
                name="Pareto front",
                line={"color": "black", "dash": "dash"},
            )
        )
    winner = plan.get("winner")
    if winner and winner.get("ttft_p99_s"):
        fig.add_trace(
            go.Scatter(
                x=[winner["cost_per_hour"]],
                y=[winner["ttft_p99_s"] * 1e3],
                mode="markers",
                name="recommended",
                marker={"symbol": "star", "size": 18, "color": "gold"},
            )
        )
    slo = (plan.get("slo") or {}).get("ttft_p99_s")
    if slo:
        fig.add_hline(y=slo * 1e3, line_color="red", annotation_text="SLO")
    fig.update_layout(title="Cost against P99 TTFT", xaxis_title="$ per hour", yaxis_title="P99 TTFT (ms)", height=450)
    return fig


def compare_cdf(first: pd.DataFrame, second: pd.DataFrame, labels: tuple[str, str]) -> go.Figure:
    fig = go.Figure()
    for frame, label in zip((first, second), labels, strict=True):
        ttft = np.sort(frame["ttft_s"].dropna().to_numpy(dtype=np.float64) * 1e3)
        if len(ttft):
            fig.add_trace(go.Scatter(x=ttft, y=np.arange(1, len(ttft) + 1) / len(ttft), mode="lines", name=label))
    fig.update_layout(title="TTFT CDF", xaxis_title="TTFT (ms)", yaxis_title="fraction", xaxis_type="log", height=400)
    return fig


def accuracy_scatter(report: dict[str, Any]) -> go.Figure:
    """Predicted against measured TTFT percentiles per stage, with the y = x line."""
    fig = go.Figure()
    top = 0.0
    for metric, symbol in (("ttft_p50", "circle"), ("ttft_p90", "square"), ("ttft_p99", "diamond")):
        points = [
            (s["measured"][metric], s["predicted"][metric], f"{s['case']} {s['stage']}")
            for s in report.get("stages", [])
            if s.get("measured", {}).get(metric) is not None and s.get("predicted", {}).get(metric) is not None
        ]
        finite = [(m, p, label) for m, p, label in points if math.isfinite(m) and math.isfinite(p)]
        if not finite:
            continue
        top = max(top, *(max(m, p) for m, p, _ in finite))
        fig.add_trace(
            go.Scatter(
                x=[m * 1e3 for m, _, _ in finite],
                y=[p * 1e3 for _, p, _ in finite],
                mode="markers",
                name=metric.replace("ttft_", "TTFT ").upper(),
                text=[label for _, _, label in finite],
                marker={"symbol": symbol, "size": 9},
            )
        )
    if top:
        fig.add_trace(go.Scatter(x=[0, top * 1e3], y=[0, top * 1e3], mode="lines", name="y = x", line={"dash": "dot"}))
    fig.update_layout(
        title="Predicted against measured", xaxis_title="measured (ms)", yaxis_title="predicted (ms)", height=450
    )
    return fig
