"""Find and read results in a results folder, for the dashboard and `ttftsim report`: simulation outputs
(`simulate --out`: summary.json, requests.parquet, timeseries.csv), plans (`plan --out`: plan.json,
manifests.yaml) and accuracy reports (`accuracy --json` saved as a .json file). Nothing outside the
folder is read: every path is resolved and checked to lie inside it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd


class ResultError(Exception):
    """A result that cannot be shown: the message says which file and why."""


@dataclass(frozen=True)
class Found:
    simulations: list[str]  # folder paths relative to the root
    plans: list[str]
    accuracy: list[str]  # file paths relative to the root


def inside(root: Path, relative: str) -> Path:
    """The path under root, refusing anything that resolves outside it (.., absolute paths, links)."""
    base = root.resolve()
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise ResultError(f"{relative}: outside the results folder, refused")
    return target


def discover(root: Path) -> Found:
    base = root.resolve()
    simulations, plans, accuracy = [], [], []
    if base.is_dir():
        for path in sorted(base.rglob("*.json")):
            relative = path.relative_to(base).as_posix()
            if base not in path.resolve().parents:
                continue
            if path.name == "summary.json":
                simulations.append(path.parent.relative_to(base).as_posix() or ".")
            elif path.name == "plan.json":
                plans.append(path.parent.relative_to(base).as_posix() or ".")
            elif _looks_like_accuracy(path):
                accuracy.append(relative)
    return Found(simulations, plans, accuracy)


def _looks_like_accuracy(path: Path) -> bool:
    try:
        head = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return path.name.startswith("accuracy")  # listed, so that the page can say what is wrong with it
    return isinstance(head, dict) and "stages" in head and "summary" in head


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultError(f"{path.name}: not found") from None
    except (OSError, ValueError) as exc:
        raise ResultError(f"{path.name}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ResultError(f"{path.name}: expected a JSON object")
    return data


@dataclass(frozen=True)
class Simulation:
    name: str
    summary: dict[str, Any]
    requests: pd.DataFrame
    series: pd.DataFrame

    @property
    def slo_s(self) -> float | None:
        slo = self.summary.get("slo") or {}
        value = slo.get("ttft_p99_s")
        return float(value) if value is not None else None


def load_simulation(root: Path, relative: str) -> Simulation:
    folder = inside(root, relative)
    try:
        summary = _json(folder / "summary.json")
    except ResultError as exc:
        raise ResultError(f"{relative}/{exc}") from None
    try:
        requests = pd.read_parquet(folder / "requests.parquet")
        series = pd.read_csv(folder / "timeseries.csv")
    except FileNotFoundError as exc:
        raise ResultError(f"{relative}: {Path(str(exc.filename)).name} missing") from None
    except Exception as exc:  # a damaged Parquet or CSV: say so in the page
        raise ResultError(f"{relative}: unreadable results ({type(exc).__name__}: {exc})") from None
    if "ttft_s" not in requests.columns or "ttft_breakdown_mean_s" not in summary:
        raise ResultError(f"{relative}: not a ttftsim simulation result (no ttft_s / breakdown)")
    name = str((summary.get("config") or {}).get("scenario", relative))
    return Simulation(name, summary, requests, series)


def load_plan(root: Path, relative: str) -> tuple[dict[str, Any], str]:
    folder = inside(root, relative)
    try:
        plan = _json(folder / "plan.json")
    except ResultError as exc:
        raise ResultError(f"{relative}/{exc}") from None
    if "ranked" not in plan:
        raise ResultError(f"{relative}/plan.json: not a ttftsim plan result")
    manifests = folder / "manifests.yaml"
    return plan, manifests.read_text(encoding="utf-8") if manifests.exists() else ""


def load_accuracy(root: Path, relative: str) -> dict[str, Any]:
    report = _json(inside(root, relative))
    if "stages" not in report:
        raise ResultError(f"{relative}: not a ttftsim accuracy report (no stages)")
    return report


def write_report(root: Path, out: Path) -> list[str]:
    """Every result under root as figures in one self-contained HTML file (plotly.js embedded once)."""
    import plotly.io as pio

    from ttftsim import figures

    found = discover(root)

    def simulation(relative: str) -> tuple[str, list[Any]]:
        sim = load_simulation(root, relative)
        shown = [figures.ttft_distribution(sim.requests, sim.slo_s), figures.ttft_breakdown(sim.summary)]
        return f"Simulation: {sim.name}", [*shown, figures.time_series(sim.series, sim.slo_s)]

    def plan(relative: str) -> tuple[str, list[Any]]:
        data, _ = load_plan(root, relative)
        return f"Plan: {data.get('plan')}", [figures.plan_scatter(data)]

    def accuracy(relative: str) -> tuple[str, list[Any]]:
        return f"Accuracy: {relative}", [figures.accuracy_scatter(load_accuracy(root, relative))]

    sections: list[str] = []
    problems: list[str] = []
    kinds = ((found.simulations, simulation), (found.plans, plan), (found.accuracy, accuracy))
    for results, render in kinds:
        for relative in results:
            try:
                title, shown = render(relative)
            except ResultError as exc:
                problems.append(str(exc))
                continue
            sections.append(f"<h2>{escape(title)}</h2>")
            for fig in shown:  # plotly.js inline once, with the first figure
                sections.append(
                    pio.to_html(fig, full_html=False, include_plotlyjs="inline" if len(sections) == 1 else False)
                )
    body = "\n".join(sections) or "<p>No results found.</p>"
    notes = "".join(f"<li>{escape(p)}</li>" for p in problems)
    html = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ttftsim report</title></head><body>"
        f"<h1>ttftsim report: {escape(root.name)}</h1>{body}"
        + (f"<h2>Not shown</h2><ul>{notes}</ul>" if notes else "")
        + "</body></html>"
    )
    out.write_text(html, encoding="utf-8")
    return problems
