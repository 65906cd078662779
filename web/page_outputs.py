"""What the dashboard's callbacks return for each view (web/app.py wires them): the explorer's figures and its
form filled from a saved run, the plan page, the comparison and the accuracy view. Every reader is the
library's (ttftsim/results.py, plan_view.py, run_settings.py); this module only lays their answers out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dash import html, no_update
from page_layout import GREY, empty, gpu_names

from ttftsim import figures, plan_view
from ttftsim.errors import InputError
from ttftsim.metrics.run_summary import RunSummary
from ttftsim.model.catalog import preset_names
from ttftsim.results import Found, ResultError, SavedPlan, Simulation, load_simulation
from ttftsim.run_settings import form_settings, traffic_difference


def summary(sim: Simulation) -> RunSummary:
    """A saved summary as the typed summary (one this version cannot read is said in the page)."""
    try:
        return RunSummary.from_json(sim.summary)
    except ValueError as exc:
        raise ResultError(f"{sim.name}: summary.json: {exc}") from None


def simulation_figures(requests: Any, run: RunSummary, series: Any, slo: float | None) -> tuple[Any, ...]:
    """The explorer's TTFT and TPOT distributions, TTFT breakdown, series, and its one-line summary."""
    ttft, tpot, counts = run.ttft_s, run.tpot_s, run.requests
    text = (
        f"{counts.arrived} requests, {counts.finished} finished; TTFT P50 {ms(ttft.p50)} ms, "
        f"P90 {ms(ttft.p90)} ms, P99 {ms(ttft.p99)} ms; TPOT mean {ms(tpot.mean)} ms, P99 {ms(tpot.p99)} ms; "
        f"ITL P99 {ms(run.itl_s.p99)} ms"
    )
    return (
        figures.ttft_distribution(requests, slo),
        figures.tpot_distribution(requests),
        figures.ttft_breakdown(run.to_json()),
        figures.time_series(series, slo),
        text,
    )


def loaded_form(sim: Simulation, folder: str) -> tuple[Any, ...]:
    """The explorer form's values for a saved run (model, GPU, TP, engine knobs, traffic, SLO) and a line
    saying where they came from; a field the run does not state keeps the form's value."""
    settings = form_settings(sim.summary, sim.requests, set(preset_names()), set(gpu_names()))
    traffic = settings.traffic

    def keep(value: Any, offered: set[str] | None = None) -> Any:
        return no_update if value is None or (offered is not None and value not in offered) else value

    rate = None if traffic.rate_per_s is None else round(traffic.rate_per_s, 2)
    prompt, output = (None if v is None else round(v) for v in (traffic.mean_prompt_tokens, traffic.mean_output_tokens))
    note = f"Form filled from {folder} (scenario {sim.name}); {settings.note}."
    return (
        keep(settings.model, set(preset_names())),
        keep(settings.hardware, set(gpu_names())),
        keep(settings.tensor_parallel_size),
        settings.max_num_seqs,
        settings.max_num_batched_tokens,
        settings.flags,
        keep(rate),
        keep(prompt),
        keep(output),
        traffic.num_requests,
        keep(None if settings.slo_ttft_p99_ms is None else round(settings.slo_ttft_p99_ms, 3)),
        note,
    )


def plan_page(saved: SavedPlan) -> tuple[Any, ...]:
    """Figure, table rows and columns, manifests, context line, error, recommendation, GPU types, README."""
    plan = saved.data
    gpus = [
        html.Li(
            [html.B(f"{g.hardware}: "), g.text],
            className="out" if g.is_out else "in",
            style={"color": GREY} if g.is_out else {},
        )
        for g in plan_view.gpu_bests(plan)
    ]
    rate = plan.get("target_rate")
    context = f"plan {plan.get('plan')}: {plan.get('candidates')} candidates" + (
        f" for {rate:,.4g} {plan.get('rate_unit') or 'req/s'}" if isinstance(rate, int | float) else ""
    )
    return (
        figures.plan_scatter(plan),
        plan_view.table_rows(plan),
        plan_view.headers(plan),
        saved.manifests or "(no manifests.yaml in this plan folder: a plan with no winner writes none)",
        context,
        "",
        plan_view.recommendation(plan),
        gpus,
        saved.readme,
    )


PERCENTILE_LABELS = {"mean": "mean", "p50": "P50", "p90": "P90", "p99": "P99", "p999": "P99.9"}  # as the CLI's


def compare_page(root: Path, a: str, b: str) -> tuple[Any, ...]:
    """CDFs, the figures of A and B side by side, a warning when their traffic differs, error."""
    first, second = load_simulation(root, a), load_simulation(root, b)
    runs = summary(first), summary(second)
    rows = []
    for metric, field in (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("ITL", "itl_s")):
        for key in ("mean", "p50", "p90", "p99", "p999") if metric == "TTFT" else ("mean", "p50", "p99"):
            va, vb = (getattr(getattr(run, field), key) for run in runs)
            rows.append({"metric": f"{metric} {PERCENTILE_LABELS[key]} (ms)", **_pair(va, vb, 1e3)})
    for name, field in (("requests/s", "requests_per_s"), ("output tokens/s", "output_tokens_per_s")):
        va, vb = (getattr(run.throughput, field) for run in runs)
        rows.append({"metric": f"throughput ({name})", **_pair(va, vb, 1)})
    columns = [{"name": k, "id": k} for k in ("metric", "A", "B", "change")]
    labels = (f"A: {a} ({first.name})", f"B: {b} ({second.name})")
    warning = traffic_difference(first.requests, second.requests)
    return figures.compare_cdf(first.requests, second.requests, labels), rows, columns, warning, ""


def _pair(va: float | None, vb: float | None, scale: float) -> dict[str, Any]:
    change = None if va in (None, 0) or vb is None else f"{(vb - va) / va:+.1%}"
    shown = (None if v is None else f"{v * scale:,.1f}" for v in (va, vb))
    return dict(zip(("A", "B"), shown, strict=True)) | {"change": change}


ACCURACY_COLUMNS = {  # the report's fields in words, errors in percent as the CLI prints them (render/accuracy.py)
    "metric": "metric",
    "median_ape": "median APE",
    "p90_ape": "P90 APE",
    "max_ape": "max APE",
    "stages": "stages",
}


def accuracy_page(report: dict[str, Any]) -> tuple[Any, ...]:
    metrics = (report.get("summary") or {}).get("metrics") or {}
    rows = [
        {"metric": k, "stages": v.get("stages")} | {f: _percent(v.get(f)) for f in ("median_ape", "p90_ape", "max_ape")}
        for k, v in metrics.items()
    ]
    columns = [{"name": name, "id": key} for key, name in ACCURACY_COLUMNS.items()]
    return figures.accuracy_scatter(report), rows, columns, ""


def _percent(value: Any) -> Any:
    """A fraction as a percentage (0.0486 -> '4.9%'), as the CLI prints it; anything else as it is."""
    return f"{value:.1%}" if isinstance(value, float) else value


def choices(found: Found, kind: str) -> list[dict[str, Any]]:
    """The complete results of a kind to pick from, then its incomplete ones: listed, but disabled."""
    names = found.simulations if kind == "simulation" else found.plans
    options: list[dict[str, Any]] = [{"label": name, "value": name} for name in names]
    for item in (i for i in found.incomplete if i.kind == kind):
        options.append({"label": f"{item.folder} (incomplete)", "value": item.folder, "disabled": True})
    return options


def incomplete(found: Found) -> Any:
    if not found.incomplete:
        return None
    count = len(found.incomplete)
    return [
        html.Span(f"{count} incomplete result{'s' * (count > 1)}, not shown:"),
        html.Ul([html.Li(item.reason) for item in found.incomplete]),
    ]


def error(exc: Exception, shown: str | None) -> str:
    """The line a view shows for an error: the message of a known one, the type too for anything else."""
    if isinstance(exc, ResultError | InputError | ValueError):
        return f"error: {exc}"
    return f"error: {shown or 'this view'} could not be shown ({type(exc).__name__}: {exc})"


def ms(value: Any) -> str:
    return "-" if value is None else f"{float(value) * 1e3:,.1f}"


def blank_explorer(message: str = "") -> tuple[Any, ...]:
    """The explorer's four figures and summary, emptied."""
    return empty(message), empty(), empty(), empty(), ""
