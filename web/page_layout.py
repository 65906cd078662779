"""The dashboard's four views as Dash layouts (what web/app.py's callbacks fill): the scenario explorer (its
form, the TTFT and TPOT distributions side by side with the breakdown and the series), the plan page (the
recommendation first, each GPU type's best, cost against latency, the candidates, the deployment), the
comparison (a warning when the traffic differs, CDFs, figures) and the accuracy view."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
from dash import dash_table, dcc, html

from ttftsim import plan_view
from ttftsim.explorer import MAX_REQUESTS
from ttftsim.hardware.catalog import all_profiles
from ttftsim.model.catalog import preset_names

GREY = "#8a8a8a"  # rows and GPU types out of the running (pruned, missed, infeasible)


def empty(message: str = "") -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        height=250,
        annotations=[{"text": message, "showarrow": False, "x": 0.5, "y": 0.5, "xref": "paper", "yref": "paper"}]
        if message
        else [],
        xaxis={"visible": False},  # nothing drawn: no axes without units
        yaxis={"visible": False},
    )
    return fig


def table(id_: str, columns: list[tuple[str, str]]) -> Any:
    """A plain table of text cells, its columns (id, header) fixed."""
    return dash_table.DataTable(
        id=id_,
        columns=[{"id": key, "name": name} for key, name in columns],
        style_table={"overflowX": "auto"},
        style_header={"whiteSpace": "normal", "height": "auto", "fontWeight": "bold"},
        style_cell={"fontFamily": "system-ui, sans-serif", "fontSize": "0.85rem", "textAlign": "left"},
    )


def gpu_names() -> list[str]:
    return [p.name for p in all_profiles() if p.kind == "gpu"]


def _number(id_: str, label: str, value: float | None, step: float | str = "any") -> html.Div:
    return html.Div(
        [html.Label(label, htmlFor=id_), dcc.Input(id=id_, type="number", value=value, step=step)], className="field"
    )


def explorer() -> html.Div:
    form = html.Div(
        [
            html.H3("Scenario"),
            html.Label("a saved result", htmlFor="explorer-result"),
            dcc.Dropdown(id="explorer-result", placeholder="pick a simulation result"),
            html.Div(id="explorer-loaded", className="loaded"),
            html.P("or run one:"),
            html.Label("model", htmlFor="explorer-model"),
            dcc.Dropdown(id="explorer-model", options=preset_names(), value="Llama-3.1-8B", clearable=False),
            html.Label("GPU", htmlFor="explorer-hardware"),
            dcc.Dropdown(id="explorer-hardware", options=gpu_names(), value="H100-SXM5-80GB", clearable=False),
            _number("explorer-tp", "tensor parallel", 1, 1),
            _number("explorer-seqs", "max_num_seqs (empty: default)", None, 1),
            _number("explorer-batch", "max_num_batched_tokens (empty: default)", None, 1),
            dcc.Checklist(
                id="explorer-flags",
                options=[
                    {"label": " chunked prefill", "value": "chunked"},
                    {"label": " prefix caching", "value": "prefix"},
                ],
                value=["chunked", "prefix"],
            ),
            _number("explorer-rate", "arrival rate (req/s)", 8),
            _number("explorer-prompt", "mean prompt tokens", 1000),
            _number("explorer-output", "mean output tokens", 200),
            _number("explorer-requests", f"requests (at most {MAX_REQUESTS})", 500, 1),
            _number("explorer-slo", "SLO: P99 TTFT (ms)", 500),
            html.Button("Run", id="explorer-run", n_clicks=0),
        ],
        className="panel",
    )
    view = html.Div(
        [
            html.Div(id="explorer-error", className="error"),
            html.Pre(id="explorer-summary"),
            html.Div(
                [
                    dcc.Graph(id="explorer-dist", figure=empty("run a scenario or pick a result"), className="half"),
                    dcc.Graph(id="explorer-tpot", figure=empty(), className="half"),
                ],
                className="pair",
            ),
            dcc.Graph(id="explorer-breakdown", figure=empty()),
            dcc.Graph(id="explorer-series", figure=empty()),
        ],
        className="view",
    )
    return html.Div([form, view], className="row")


def plan() -> html.Div:
    out_of_the_running = " && ".join(f"{{status}} != {status}" for status in plan_view.IN_THE_RUNNING)
    return html.Div(
        [
            dcc.Dropdown(id="plan-result", placeholder="pick a plan result"),
            html.Div(id="plan-error", className="error"),
            html.Div(id="plan-recommendation", className="recommendation"),
            html.Div(id="plan-summary", className="context"),
            html.H4("Best per GPU type"),
            html.Ul(id="plan-gpus", className="gpus"),
            dcc.Graph(id="plan-scatter", figure=empty("pick a plan")),
            html.H4("Candidates"),
            dash_table.DataTable(
                id="plan-table",
                sort_action="native",
                page_size=20,
                style_table={"overflowX": "auto"},
                style_header={"whiteSpace": "normal", "height": "auto", "fontWeight": "bold"},
                style_cell={"fontFamily": "system-ui, sans-serif", "fontSize": "0.85rem", "textAlign": "right"},
                style_cell_conditional=[
                    {"if": {"column_id": c}, "textAlign": "left"} for c in ("label", "status", "binding", "why_out")
                ],
                style_data_conditional=[
                    {"if": {"filter_query": out_of_the_running}, "color": GREY, "backgroundColor": "#f4f4f4"}
                ],
            ),
            html.H4("Deploying the recommendation"),
            dcc.Markdown(id="plan-readme", className="readme"),
            html.H5("manifests.yaml"),
            html.Pre(id="plan-manifests", className="manifests"),
        ]
    )


def compare() -> html.Div:
    return html.Div(
        [
            html.Div(
                [
                    dcc.Dropdown(id="compare-a", placeholder="A: a simulation result"),
                    dcc.Dropdown(id="compare-b", placeholder="B: a simulation result"),
                ],
                className="row",
            ),
            html.Div(id="compare-error", className="error"),
            html.Div(id="compare-warning", className="warning"),
            dcc.Graph(id="compare-cdf", figure=empty("pick two results")),
            dash_table.DataTable(id="compare-table"),
        ]
    )


def accuracy() -> html.Div:
    return html.Div(
        [
            dcc.Dropdown(id="accuracy-result", placeholder="pick an accuracy report (ttftsim accuracy --json)"),
            html.Div(id="accuracy-error", className="error"),
            dcc.Graph(id="accuracy-scatter", figure=empty("pick a report")),
            dash_table.DataTable(id="accuracy-table"),
        ]
    )
