"""The ttftsim dashboard (Plotly Dash): a scenario explorer, the plan view, a side-by-side comparison and the
accuracy view, over the results in one folder. Started by `ttftsim dashboard RESULTS_DIR`.

The boundary: every file read is resolved (links followed) inside the results folder and refused otherwise
(ttftsim/results.py); a result folder without its completion marker is listed as incomplete and cannot be
opened; the explorer runs only model presets and hardware profiles, or files inside the results folder, whatever
a request sends; a malformed result, or any error while drawing it, is shown in the page (never an HTTP 500)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from dash import Dash, Input, Output, State, ctx, dash_table, dcc, html

from ttftsim import figures
from ttftsim.errors import InputError
from ttftsim.explorer import MAX_REQUESTS, run_form
from ttftsim.hardware.catalog import all_profiles
from ttftsim.metrics.run_summary import RunSummary
from ttftsim.model.catalog import preset_names
from ttftsim.results import (
    Found,
    ResultError,
    Simulation,
    discover,
    load_accuracy,
    load_plan,
    load_simulation,
)


def _empty(message: str = "") -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        height=250, annotations=[{"text": message, "showarrow": False, "x": 0.5, "y": 0.5}] if message else []
    )
    return fig


def _number(id_: str, label: str, value: float | None, step: float = 1) -> html.Div:
    return html.Div(
        [html.Label(label, htmlFor=id_), dcc.Input(id=id_, type="number", value=value, step=step)], className="field"
    )


def _explorer() -> html.Div:
    models = preset_names()
    hardware = [p.name for p in all_profiles() if p.kind == "gpu"]
    form = html.Div(
        [
            html.H3("Scenario"),
            html.Label("a saved result", htmlFor="explorer-result"),
            dcc.Dropdown(id="explorer-result", placeholder="pick a simulation result"),
            html.P("or run one:"),
            html.Label("model", htmlFor="explorer-model"),
            dcc.Dropdown(id="explorer-model", options=models, value="Llama-3.1-8B", clearable=False),
            html.Label("GPU", htmlFor="explorer-hardware"),
            dcc.Dropdown(id="explorer-hardware", options=hardware, value="H100-SXM5-80GB", clearable=False),
            _number("explorer-tp", "tensor parallel", 1),
            _number("explorer-seqs", "max_num_seqs (empty: default)", None),
            _number("explorer-batch", "max_num_batched_tokens (empty: default)", None),
            dcc.Checklist(
                id="explorer-flags",
                options=[
                    {"label": " chunked prefill", "value": "chunked"},
                    {"label": " prefix caching", "value": "prefix"},
                ],
                value=["chunked", "prefix"],
            ),
            _number("explorer-rate", "arrival rate (req/s)", 8, 0.5),
            _number("explorer-prompt", "mean prompt tokens", 1000, 50),
            _number("explorer-output", "mean output tokens", 200, 10),
            _number("explorer-requests", f"requests (at most {MAX_REQUESTS})", 500, 100),
            _number("explorer-slo", "SLO: P99 TTFT (ms)", 500, 10),
            html.Button("Run", id="explorer-run", n_clicks=0),
        ],
        className="panel",
    )
    view = html.Div(
        [
            html.Div(id="explorer-error", className="error"),
            html.Pre(id="explorer-summary"),
            dcc.Graph(id="explorer-dist", figure=_empty("run a scenario or pick a result")),
            dcc.Graph(id="explorer-breakdown", figure=_empty()),
            dcc.Graph(id="explorer-series", figure=_empty()),
        ],
        className="view",
    )
    return html.Div([form, view], className="row")


def _plan() -> html.Div:
    return html.Div(
        [
            dcc.Dropdown(id="plan-result", placeholder="pick a plan result"),
            html.Div(id="plan-error", className="error"),
            html.Pre(id="plan-summary"),
            dcc.Graph(id="plan-scatter", figure=_empty("pick a plan")),
            dash_table.DataTable(
                id="plan-table", sort_action="native", page_size=15, style_table={"overflowX": "auto"}
            ),
            html.H4("Manifests of the recommended deployment"),
            html.Pre(id="plan-manifests", className="manifests"),
        ]
    )


def _compare() -> html.Div:
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
            dcc.Graph(id="compare-cdf", figure=_empty("pick two results")),
            dash_table.DataTable(id="compare-table"),
        ]
    )


def _accuracy() -> html.Div:
    return html.Div(
        [
            dcc.Dropdown(id="accuracy-result", placeholder="pick an accuracy report (ttftsim accuracy --json)"),
            html.Div(id="accuracy-error", className="error"),
            dcc.Graph(id="accuracy-scatter", figure=_empty("pick a report")),
            dash_table.DataTable(id="accuracy-table"),
        ]
    )


def create_app(root: Path) -> Dash:
    app = Dash(__name__, title="ttftsim", assets_folder=str(Path(__file__).parent / "assets"))
    app.layout = html.Div(
        [
            html.H1("ttftsim"),
            html.Div(f"results: {root}", className="root"),
            html.Div(id="incomplete", className="incomplete"),
            dcc.Interval(id="refresh", interval=5000, n_intervals=0),
            dcc.Tabs(
                id="tabs",
                value="explorer",
                children=[
                    dcc.Tab(label="Scenario explorer", value="explorer", children=_explorer()),
                    dcc.Tab(label="Plan", value="plan", children=_plan()),
                    dcc.Tab(label="Compare", value="compare", children=_compare()),
                    dcc.Tab(label="Accuracy", value="accuracy", children=_accuracy()),
                ],
            ),
        ]
    )
    _callbacks(app, root)
    return app


def _callbacks(app: Dash, root: Path) -> None:  # noqa: C901 (one closure per view)
    @app.callback(
        Output("explorer-result", "options"),
        Output("plan-result", "options"),
        Output("compare-a", "options"),
        Output("compare-b", "options"),
        Output("accuracy-result", "options"),
        Output("incomplete", "children"),
        Input("refresh", "n_intervals"),
    )
    def _options(_: int) -> tuple[Any, ...]:
        try:
            found = discover(root)
        except Exception as exc:  # an unreadable folder: said in the page, the lists stay empty
            return [], [], [], [], [], f"error: cannot list the results folder ({type(exc).__name__}: {exc})"
        simulations, plans = _choices(found, "simulation"), _choices(found, "plan")
        return simulations, plans, simulations, simulations, found.accuracy, _incomplete(found)

    @app.callback(
        Output("explorer-dist", "figure"),
        Output("explorer-breakdown", "figure"),
        Output("explorer-series", "figure"),
        Output("explorer-summary", "children"),
        Output("explorer-error", "children"),
        Input("explorer-run", "n_clicks"),
        Input("explorer-result", "value"),
        State("explorer-model", "value"),
        State("explorer-hardware", "value"),
        State("explorer-tp", "value"),
        State("explorer-seqs", "value"),
        State("explorer-batch", "value"),
        State("explorer-flags", "value"),
        State("explorer-rate", "value"),
        State("explorer-prompt", "value"),
        State("explorer-output", "value"),
        State("explorer-requests", "value"),
        State("explorer-slo", "value"),
        prevent_initial_call=True,
    )
    def _explore(_: int, result: str | None, *form: Any) -> tuple[Any, ...]:
        try:
            if ctx.triggered_id == "explorer-result":
                if not result:
                    return _empty(), _empty(), _empty(), "", ""
                sim = load_simulation(root, result)
                return (*_simulation_figures(sim.requests, _summary(sim), sim.series, sim.slo_s), "")
            requests, summary, series, slo = run_form(root, form)
            return (*_simulation_figures(requests, summary, series, slo), "")
        except Exception as exc:  # whatever goes wrong is said in the page, never an HTTP 500
            return (
                _empty(),
                _empty(),
                _empty(),
                "",
                _error(exc, result if ctx.triggered_id == "explorer-result" else "the run"),
            )

    @app.callback(
        Output("plan-scatter", "figure"),
        Output("plan-table", "data"),
        Output("plan-table", "columns"),
        Output("plan-manifests", "children"),
        Output("plan-summary", "children"),
        Output("plan-error", "children"),
        Input("plan-result", "value"),
        prevent_initial_call=True,
    )
    def _plan_view(result: str | None) -> tuple[Any, ...]:
        if not result:
            return _empty("pick a plan"), [], [], "", "", ""
        try:
            return _plan_outputs(*load_plan(root, result))
        except Exception as exc:  # whatever goes wrong is said in the page, never an HTTP 500
            return _empty(), [], [], "", "", _error(exc, result)

    @app.callback(
        Output("compare-cdf", "figure"),
        Output("compare-table", "data"),
        Output("compare-table", "columns"),
        Output("compare-error", "children"),
        Input("compare-a", "value"),
        Input("compare-b", "value"),
        prevent_initial_call=True,
    )
    def _compare_view(a: str | None, b: str | None) -> tuple[Any, ...]:
        if not a or not b:
            return _empty("pick two results"), [], [], ""
        try:
            return _compare_outputs(root, a, b)
        except Exception as exc:  # whatever goes wrong is said in the page, never an HTTP 500
            return _empty(), [], [], _error(exc, f"{a} / {b}")

    @app.callback(
        Output("accuracy-scatter", "figure"),
        Output("accuracy-table", "data"),
        Output("accuracy-table", "columns"),
        Output("accuracy-error", "children"),
        Input("accuracy-result", "value"),
        prevent_initial_call=True,
    )
    def _accuracy_view(result: str | None) -> tuple[Any, ...]:
        if not result:
            return _empty("pick a report"), [], [], ""
        try:
            return _accuracy_outputs(load_accuracy(root, result))
        except Exception as exc:  # whatever goes wrong is said in the page, never an HTTP 500
            return _empty(), [], [], _error(exc, result)


def _plan_outputs(plan: dict[str, Any], manifests: str) -> tuple[Any, ...]:
    keys = (
        "label",
        "status",
        "replicas",
        "gpus",
        "cost_per_hour",
        "ttft_p50_s",
        "ttft_p99_s",
        "headroom",
        "reason",
    )
    rows = [{k: _cell(r.get(k)) for k in keys} for r in plan["ranked"]]
    winner = plan.get("winner") or {}
    text = f"{plan.get('plan')}: {plan.get('candidates')} candidates; recommended: {winner.get('label', 'none')}"
    return figures.plan_scatter(plan), rows, [{"name": k, "id": k} for k in keys], manifests, text, ""


def _compare_outputs(root: Path, a: str, b: str) -> tuple[Any, ...]:
    first, second = load_simulation(root, a), load_simulation(root, b)
    rows = []
    for key in ("p50", "p90", "p99", "p999"):
        va, vb = (getattr(_summary(sim).ttft_s, key) for sim in (first, second))
        change = None if va in (None, 0) or vb is None else f"{(vb - va) / va:+.1%}"
        rows.append({"metric": f"TTFT {key.upper()} (ms)", "A": _ms(va), "B": _ms(vb), "change": change})
    columns = [{"name": k, "id": k} for k in ("metric", "A", "B", "change")]
    labels = (f"A: {a} ({first.name})", f"B: {b} ({second.name})")
    return figures.compare_cdf(first.requests, second.requests, labels), rows, columns, ""


def _accuracy_outputs(report: dict[str, Any]) -> tuple[Any, ...]:
    metrics = (report.get("summary") or {}).get("metrics") or {}
    rows = [
        {"metric": k, **{f: _cell(v.get(f)) for f in ("median_ape", "p90_ape", "max_ape", "stages")}}
        for k, v in metrics.items()
    ]
    columns = [{"name": k, "id": k} for k in ("metric", "median_ape", "p90_ape", "max_ape", "stages")]
    return figures.accuracy_scatter(report), rows, columns, ""


def _summary(sim: Simulation) -> RunSummary:
    """A saved summary as the typed summary (one this version cannot read is said in the page)."""
    try:
        return RunSummary.from_json(sim.summary)
    except ValueError as exc:
        raise ResultError(f"{sim.name}: summary.json: {exc}") from None


def _simulation_figures(requests: Any, summary: RunSummary, series: Any, slo: float | None) -> tuple[Any, ...]:
    ttft, counts = summary.ttft_s, summary.requests
    text = (
        f"{counts.arrived} requests, {counts.finished} finished; TTFT P50 {_ms(ttft.p50)} ms, "
        f"P90 {_ms(ttft.p90)} ms, P99 {_ms(ttft.p99)} ms"
    )
    return (
        figures.ttft_distribution(requests, slo),
        figures.ttft_breakdown(summary.to_json()),
        figures.time_series(series, slo),
        text,
    )


def _choices(found: Found, kind: str) -> list[dict[str, Any]]:
    """The complete results of a kind to pick from, then its incomplete ones: listed, but disabled."""
    names = found.simulations if kind == "simulation" else found.plans
    options: list[dict[str, Any]] = [{"label": name, "value": name} for name in names]
    for item in (i for i in found.incomplete if i.kind == kind):
        options.append({"label": f"{item.folder} (incomplete)", "value": item.folder, "disabled": True})
    return options


def _incomplete(found: Found) -> Any:
    if not found.incomplete:
        return None
    count = len(found.incomplete)
    return [
        html.Span(f"{count} incomplete result{'s' * (count > 1)}, not shown:"),
        html.Ul([html.Li(item.reason) for item in found.incomplete]),
    ]


def _error(exc: Exception, shown: str | None) -> str:
    """The line a view shows for an error: the message of a known one, the type too for anything else."""
    if isinstance(exc, ResultError | InputError | ValueError):
        return f"error: {exc}"
    return f"error: {shown or 'this view'} could not be shown ({type(exc).__name__}: {exc})"


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value) * 1e3:,.1f}"


def _cell(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value
