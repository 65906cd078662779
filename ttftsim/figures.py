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
    return distribution(requests, "ttft_s", slo_s, title, "TTFT (ms)")


def tpot_distribution(requests: pd.DataFrame, slo_s: float | None = None) -> go.Figure:
    """Histogram and CDF of each request's TPOT (ms per output token after the first), as vLLM's benchmark
    computes it: (end-to-end - TTFT) / (output tokens - 1); requests of one token have none."""
    title = "TPOT (time per output token, per request)"
    return distribution(requests, "tpot_s", slo_s, title, "TPOT (ms per token)")


def distribution(requests: pd.DataFrame, column: str, slo_s: float | None, title: str, axis: str) -> go.Figure:
    """Histogram and CDF of a per-request latency column (seconds, drawn in ms) with P50/P90/P99 and the
    SLO line; a result without the column says so in the figure."""
    if column not in requests:
        fig = go.Figure()
        fig.update_layout(title=f"{title}: not in this result", height=200)
        return fig
    values = requests[column].dropna().to_numpy(dtype=np.float64) * 1e3
    fig = make_subplots(rows=1, cols=2, subplot_titles=("histogram", "CDF"))
    fig.add_trace(go.Histogram(x=values, nbinsx=60, name="requests"), row=1, col=1)
    ordered = np.sort(values)
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
            fig.add_annotation(x=value, y=q, text=f"{label} {value:,.1f} ms", showarrow=False, row=1, col=2, yshift=10)
    if slo_s is not None:
        for col in (1, 2):
            fig.add_vline(x=slo_s * 1e3, line_color="red", row=1, col=col)
        fig.add_annotation(x=slo_s * 1e3, y=1.0, text="SLO", showarrow=False, row=1, col=2, font={"color": "red"})
    fig.update_xaxes(title_text=axis)
    fig.update_yaxes(title_text="requests", row=1, col=1)
    fig.update_yaxes(title_text="fraction of requests", row=1, col=2)
    fig.update_layout(title=title, showlegend=False, height=380, margin={"t": 60, "b": 40})
    return fig


def ttft_breakdown(summary: dict[str, Any], title: str = "Where TTFT goes (mean)") -> go.Figure:
    parts = summary.get("ttft_breakdown_mean_s", {})
    names = [k.removesuffix("_s") for k in BREAKDOWN if parts.get(k) is not None]
    values = [parts[k] * 1e3 for k in BREAKDOWN if parts.get(k) is not None]
    fig = go.Figure(go.Bar(x=values, y=names, orientation="h", text=[f"{v:,.1f} ms" for v in values]))
    fig.update_yaxes(title_text="part of TTFT")
    fig.update_layout(title=title, xaxis_title="mean time (ms)", height=300, margin={"t": 50, "b": 40})
    return fig


def time_series(series: pd.DataFrame, slo_s: float | None) -> go.Figure:
    """Arrival rate, running and waiting, KV usage and hit rate, TTFT P99 per window (and pods, for a
    cluster)."""
    cluster = "pods_ready" in series.columns
    rows = 5 if cluster else 4
    titles = ["arrival rate (req/s)", "running / waiting (requests)", "KV usage / prefix hit rate (fraction)"]
    titles.append("TTFT P99 per window (ms)")
    if cluster:
        titles.append("replicas and pods (count)")
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
    for row, unit in enumerate(("req/s", "requests", "fraction", "ms", "pods")[:rows], start=1):
        fig.update_yaxes(title_text=unit, row=row, col=1)
    fig.update_layout(height=220 * rows, title="Over time", margin={"t": 60, "b": 40})
    return fig


def _line(fig: go.Figure, t: Any, series: pd.DataFrame, column: str, row: int) -> None:
    if column in series:
        fig.add_trace(go.Scatter(x=t, y=series[column], name=column, mode="lines"), row=row, col=1)


OUT_OF_THE_RUNNING_COLOR = "#b0b0b0"  # missed, pruned, infeasible: grey, as in the plan page's table
STATUS_COLORS = {"confirmed": "#2a7d2a", "estimate": "#1f77b4"}


def plan_scatter(plan: dict[str, Any]) -> go.Figure:
    """Candidates' cost per hour against P99 TTFT (the Pareto front drawn, the winner starred, the SLO line)
    and against TPOT (the statistic the SLO sets, else the mean), side by side; candidates out of the running
    with a known cost in grey."""
    rows = [r for r in plan.get("ranked", []) if r.get("cost_per_hour") is not None and r.get("ttft_p99_s")]
    slo = plan.get("slo") or {}
    tpot = "tpot_p99_s" if "tpot_p99_s" in slo and "tpot_mean_s" not in slo else "tpot_mean_s"
    tpot_name = "P99 TPOT" if tpot == "tpot_p99_s" else "mean TPOT"
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("cost against P99 TTFT", f"cost against {tpot_name}"), horizontal_spacing=0.1
    )
    for status in sorted({r["status"] for r in rows}, key=lambda s: (s not in STATUS_COLORS, s)):
        chosen = [r for r in rows if r["status"] == status]
        color = STATUS_COLORS.get(status, OUT_OF_THE_RUNNING_COLOR)
        for col, key in ((1, "ttft_p99_s"), (2, tpot)):
            shown = [r for r in chosen if r.get(key) is not None]
            fig.add_trace(
                go.Scatter(
                    x=[r["cost_per_hour"] for r in shown],
                    y=[r[key] * 1e3 for r in shown],
                    mode="markers",
                    name=status,
                    legendgroup=status,
                    showlegend=col == 1,
                    text=[r["label"] for r in shown],
                    marker={"size": 10, "color": color},
                ),
                row=1,
                col=col,
            )
    front = {r["label"] for r in plan.get("pareto", [])}
    pareto = sorted((r for r in rows if r["label"] in front), key=lambda r: r["cost_per_hour"])
    if pareto:
        fig.add_trace(
            go.Scatter(
                x=[r["cost_per_hour"] for r in pareto],
                y=[r["ttft_p99_s"] * 1e3 for r in pareto],
                mode="lines+markers",
                name="Pareto front (cost, P99 TTFT)",
                line={"color": "black", "dash": "dash"},
            ),
            row=1,
            col=1,
        )
    winner = plan.get("winner")
    if winner and winner.get("ttft_p99_s"):
        for col, key in ((1, "ttft_p99_s"), (2, tpot)):
            if winner.get(key) is not None:
                fig.add_trace(
                    go.Scatter(
                        x=[winner["cost_per_hour"]],
                        y=[winner[key] * 1e3],
                        mode="markers",
                        name="recommended",
                        legendgroup="recommended",
                        showlegend=col == 1,
                        marker={"symbol": "star", "size": 18, "color": "gold", "line": {"color": "black", "width": 1}},
                    ),
                    row=1,
                    col=col,
                )
    for col, key in ((1, "ttft_p99_s"), (2, tpot)):
        if slo.get(key):
            fig.add_hline(y=slo[key] * 1e3, line_color="red", annotation_text="SLO", row=1, col=col)
    fig.update_xaxes(title_text="cost ($/h)")
    fig.update_yaxes(title_text="P99 TTFT (ms)", row=1, col=1)
    fig.update_yaxes(title_text=f"{tpot_name} (ms per token)", row=1, col=2)
    fig.update_layout(title="Cost against latency, per candidate", height=450)
    return fig


def compare_cdf(first: pd.DataFrame, second: pd.DataFrame, labels: tuple[str, str]) -> go.Figure:
    """CDFs of TTFT and of TPOT for two runs, side by side (log time axes)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("TTFT", "TPOT (per request)"))
    colors = ("#1f77b4", "#d62728")
    for frame, label, color in zip((first, second), labels, colors, strict=True):
        for col, column in ((1, "ttft_s"), (2, "tpot_s")):
            if column not in frame:
                continue
            values = np.sort(frame[column].dropna().to_numpy(dtype=np.float64) * 1e3)
            if len(values):
                fig.add_trace(
                    go.Scatter(
                        x=values,
                        y=np.arange(1, len(values) + 1) / len(values),
                        mode="lines",
                        name=label,
                        legendgroup=label,
                        showlegend=col == 1,
                        line={"color": color},
                    ),
                    row=1,
                    col=col,
                )
    fig.update_xaxes(type="log")
    fig.update_xaxes(title_text="TTFT (ms)", row=1, col=1)
    fig.update_xaxes(title_text="TPOT (ms per token)", row=1, col=2)
    fig.update_yaxes(title_text="fraction of requests")
    fig.update_layout(title="CDF of A and B", height=420, legend={"orientation": "h", "y": -0.2})
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
