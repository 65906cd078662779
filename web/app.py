"""The ttftsim dashboard (Plotly Dash): a scenario explorer, the plan view, a side-by-side comparison, the
accuracy view and the fit view (a calibration of `ttftsim fit`), over the results in one folder. Started by
`ttftsim dashboard RESULTS_DIR`. The views' layouts are in web/page_layout.py (the fit view's in
web/page_fit.py), what their callbacks return in web/page_outputs.py; this module wires them.

The boundary: every file read is resolved (links followed) inside the results folder and refused otherwise
(ttftsim/results.py); a result folder without its completion marker is listed as incomplete and cannot be
opened; the explorer runs only model presets and hardware profiles, or files inside the results folder, whatever
a request sends; a malformed result, or any error while drawing it, is shown in the page (never an HTTP 500)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

# web/ is a folder of scripts, not a package (ttftsim/cli/outputs.py loads this file by path): its own
# modules are found beside it
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

import page_fit
import page_layout
import page_outputs

from ttftsim.accuracy_view import find_calibrations, load_fit_view
from ttftsim.explorer import run_form
from ttftsim.results import discover, load_accuracy, load_plan, load_simulation

FORM = ("model", "hardware", "tp", "seqs", "batch", "flags", "rate", "prompt", "output", "requests", "slo")


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
                    dcc.Tab(label="Scenario explorer", value="explorer", children=page_layout.explorer()),
                    dcc.Tab(label="Plan", value="plan", children=page_layout.plan()),
                    dcc.Tab(label="Compare", value="compare", children=page_layout.compare()),
                    dcc.Tab(label="Accuracy", value="accuracy", children=page_layout.accuracy()),
                    dcc.Tab(label="Fit", value="fit", children=page_fit.layout()),
                ],
            ),
        ]
    )
    _result_lists(app, root)
    _explorer(app, root)
    _views(app, root)
    _fit(app, root)
    return app


def _result_lists(app: Dash, root: Path) -> None:
    @app.callback(
        Output("explorer-result", "options"),
        Output("plan-result", "options"),
        Output("compare-a", "options"),
        Output("compare-b", "options"),
        Output("accuracy-result", "options"),
        Output("incomplete", "children"),
        Output("fit-files", "children"),
        Input("refresh", "n_intervals"),
    )
    def _options(_: int) -> tuple[Any, ...]:
        try:
            found, calibrations = discover(root), find_calibrations(root)
        except Exception as exc:  # an unreadable folder: said in the page, the lists stay empty
            return [], [], [], [], [], f"error: cannot list the results folder ({type(exc).__name__}: {exc})", []
        simulations, plans = page_outputs.choices(found, "simulation"), page_outputs.choices(found, "plan")
        fits = [html.Option(value=name) for name in calibrations]
        return simulations, plans, simulations, simulations, found.accuracy, page_outputs.incomplete(found), fits


def _explorer(app: Dash, root: Path) -> None:
    @app.callback(
        Output("explorer-dist", "figure"),
        Output("explorer-tpot", "figure"),
        Output("explorer-breakdown", "figure"),
        Output("explorer-series", "figure"),
        Output("explorer-summary", "children"),
        Output("explorer-error", "children"),
        Input("explorer-run", "n_clicks"),
        Input("explorer-result", "value"),
        *(State(f"explorer-{name}", "value") for name in FORM),
        prevent_initial_call=True,
    )
    def _explore(_: int, result: str | None, *form: Any) -> tuple[Any, ...]:
        try:
            if ctx.triggered_id == "explorer-result":
                if not result:
                    return (*page_outputs.blank_explorer(), "")
                sim = load_simulation(root, result)
                run = page_outputs.summary(sim)
                return (*page_outputs.simulation_figures(sim.requests, run, sim.series, sim.slo_s), "")
            requests, summary, series, slo = run_form(root, form)
            return (*page_outputs.simulation_figures(requests, summary, series, slo), "")
        except Exception as exc:  # whatever goes wrong is said in the page, never an HTTP 500
            shown = result if ctx.triggered_id == "explorer-result" else "the run"
            return (*page_outputs.blank_explorer(), page_outputs.error(exc, shown))

    @app.callback(
        *(Output(f"explorer-{name}", "value") for name in FORM),
        Output("explorer-loaded", "children"),
        Input("explorer-result", "value"),
        prevent_initial_call=True,
    )
    def _fill_form(result: str | None) -> tuple[Any, ...]:
        """A saved run's settings in the form, so that Run starts from them; an error is the figures' to say."""
        unchanged = (no_update,) * len(FORM)
        if not result:
            return (*unchanged, "")
        try:
            return page_outputs.loaded_form(load_simulation(root, result), result)
        except Exception:  # the explorer's figure callback shows the error of this same result
            return (*unchanged, "")


def _views(app: Dash, root: Path) -> None:
    @app.callback(
        Output("plan-scatter", "figure"),
        Output("plan-table", "data"),
        Output("plan-table", "columns"),
        Output("plan-manifests", "children"),
        Output("plan-summary", "children"),
        Output("plan-error", "children"),
        Output("plan-recommendation", "children"),
        Output("plan-gpus", "children"),
        Output("plan-readme", "children"),
        Input("plan-result", "value"),
        prevent_initial_call=True,
    )
    def _plan_view(result: str | None) -> tuple[Any, ...]:
        if not result:
            return page_layout.empty("pick a plan"), [], [], "", "", "", "", [], ""
        try:
            return page_outputs.plan_page(load_plan(root, result))
        except Exception as exc:  # whatever goes wrong is said in the page, never an HTTP 500
            return page_layout.empty(), [], [], "", "", page_outputs.error(exc, result), "", [], ""

    @app.callback(
        Output("compare-cdf", "figure"),
        Output("compare-table", "data"),
        Output("compare-table", "columns"),
        Output("compare-warning", "children"),
        Output("compare-error", "children"),
        Input("compare-a", "value"),
        Input("compare-b", "value"),
        prevent_initial_call=True,
    )
    def _compare_view(a: str | None, b: str | None) -> tuple[Any, ...]:
        if not a or not b:
            return page_layout.empty("pick two results"), [], [], "", ""
        try:
            return page_outputs.compare_page(root, a, b)
        except Exception as exc:  # whatever goes wrong is said in the page, never an HTTP 500
            return page_layout.empty(), [], [], "", page_outputs.error(exc, f"{a} / {b}")

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
            return page_layout.empty("pick a report"), [], [], ""
        try:
            return page_outputs.accuracy_page(load_accuracy(root, result))
        except Exception as exc:  # whatever goes wrong is said in the page, never an HTTP 500
            return page_layout.empty(), [], [], page_outputs.error(exc, result)


def _fit(app: Dash, root: Path) -> None:
    @app.callback(
        Output("fit-figure", "figure"),
        Output("fit-factors", "data"),
        Output("fit-errors", "data"),
        Output("fit-table", "data"),
        Output("fit-note", "children"),
        Output("fit-error", "children"),
        Input("fit-file", "value"),
        prevent_initial_call=True,
    )
    def _fit_view(calibration: str | None) -> tuple[Any, ...]:
        if not calibration:
            return page_fit.blank()
        try:
            return page_fit.outputs(load_fit_view(root, calibration))
        except Exception as exc:  # whatever goes wrong is said in the page, never an HTTP 500
            return page_fit.blank(page_outputs.error(exc, calibration))
