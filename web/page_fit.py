"""The dashboard's fit view: a calibration file written by `ttftsim fit` (typed, or picked from those found in
the results folder), drawn from ttftsim/accuracy_view.py's rows: the factors with their range over the folds,
the median errors, and per run and metric the measured value against the predictions in-sample, held out and
without the fit, each with its 95% interval. This module only lays those rows out."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from dash import dcc, html
from page_layout import empty, table
from plotly.subplots import make_subplots

from ttftsim.accuracy_view import COLUMNS, METRICS, Estimate, FitView, error_rows, factor_rows, table_rows

SERIES = (  # (field of RunMetric, legend, colour, marker)
    ("measured", "measured", "#222222", "diamond"),
    ("in_sample", "in-sample (fit on every run)", "#1f77b4", "circle"),
    ("held_out", "held out (fold fit without the run)", "#ff7f0e", "square"),
    ("unfitted", "without the fit", "#8a8a8a", "circle-open"),
)


def layout() -> html.Div:
    return html.Div(
        [
            html.Label("calibration file (ttftsim fit -o ...), a path inside the results folder", htmlFor="fit-file"),
            dcc.Input(
                id="fit-file",
                type="text",
                list="fit-files",
                debounce=True,
                placeholder="my-cluster.json",
                style={"width": "40rem"},
            ),
            html.Datalist(id="fit-files"),
            html.Div(id="fit-error", className="error"),
            html.Div(id="fit-note", className="context"),
            html.Div(
                [
                    html.Div([html.H4("Fitted factors"), table("fit-factors", _FACTOR_COLUMNS)], className="half"),
                    html.Div([html.H4("Median absolute error"), table("fit-errors", _ERROR_COLUMNS)], className="half"),
                ],
                className="pair",
            ),
            dcc.Graph(id="fit-figure", figure=empty("type or pick a calibration file")),
            html.H4("Per run and metric (95% intervals in brackets)"),
            table("fit-table", list(COLUMNS)),
            html.P(INTERVALS, className="context"),
        ]
    )


INTERVALS = (
    "Measured: the reported percentiles around each percentile's rank interval for the run's request count "
    "(? where the report gives nothing beyond it); a reported mean and the median TPOT have none. Predicted: "
    "order statistics of the simulated requests (seeds pooled), a mean +/- 1.96 standard errors. In-sample: the "
    "fit on every run; held out: the fit on the other folds' runs, the run's own cross-validated prediction."
)
_FACTOR_COLUMNS = [("factor", "factor"), ("value", "value"), ("range", "range over the folds"), ("fitted", "fitted")]
_ERROR_COLUMNS = [
    ("metric", "metric"),
    ("unfitted", "without the fit"),
    ("in_sample", "in-sample"),
    ("cross_validated", "cross-validated"),
]


def outputs(view: FitView) -> tuple[Any, ...]:
    """The figure, factor rows, error rows, per-run rows, the note line and the (empty) error."""
    return figure(view), factor_rows(view), error_rows(view), table_rows(view), view.note, ""


def blank(message: str = "") -> tuple[Any, ...]:
    return empty(), [], [], [], "", message


def _bars(estimates: list[Estimate | None]) -> dict[str, Any]:
    """Asymmetric error bars (ms) of each estimate's interval; 0 on a side without one."""
    plus, minus = [], []
    for e in estimates:
        value = None if e is None else e.value_s
        plus.append(0.0 if value is None or e is None or e.hi_s is None else (e.hi_s - value) * 1e3)
        minus.append(0.0 if value is None or e is None or e.lo_s is None else (value - e.lo_s) * 1e3)
    return {"type": "data", "symmetric": False, "array": plus, "arrayminus": minus, "thickness": 1.2}


def figure(view: FitView) -> go.Figure:
    """One panel per metric: each run's measured value and the three predictions, with their intervals."""
    metrics = [m for m in METRICS if any(row.metric == m for row in view.runs)]
    if not metrics:
        return empty("no per-run predictions in this calibration's record")
    fig = make_subplots(rows=1, cols=len(metrics), subplot_titles=[METRICS[m] for m in metrics])
    for column, metric in enumerate(metrics, start=1):
        rows = [row for row in view.runs if row.metric == metric]
        labels = [row.run for row in rows]
        for field, name, colour, symbol in SERIES:
            estimates: list[Estimate | None] = [getattr(row, field) for row in rows]
            if all(e is None for e in estimates):
                continue
            values = [None if e is None or e.value_s in (None, float("inf")) else e.value_s * 1e3 for e in estimates]
            fig.add_trace(
                go.Scatter(
                    x=labels,
                    y=values,
                    mode="markers",
                    name=name,
                    legendgroup=field,
                    showlegend=column == 1,
                    marker={"color": colour, "symbol": symbol, "size": 9},
                    error_y=_bars(estimates),
                ),
                row=1,
                col=column,
            )
        fig.update_yaxes(title_text="ms" if column == 1 else None, rangemode="tozero", row=1, col=column)
    fig.update_layout(height=420, margin={"t": 40}, legend={"orientation": "h", "y": -0.25}, scattermode="group")
    return fig
