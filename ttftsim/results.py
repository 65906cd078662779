"""Find and read results in a results folder, for the dashboard and `ttftsim report`: simulation outputs
(`simulate --out`: summary.json, requests.parquet, timeseries.csv), plans (`plan --out`: plan.json,
manifests.yaml) and accuracy reports (`accuracy --json` saved as a .json file).

Nothing outside the folder is read: every path, each file inside a result folder included, is resolved
(links followed) and checked to lie inside it. Hidden entries (staging folders of a write in progress,
.git) are skipped. A simulation or plan folder is shown only when complete: its marker (complete.json,
ttftsim/result_folder.py) is there and every file it lists has the size it records; otherwise it is listed
as incomplete, with the reason. A malformed result is a ResultError naming the file and the field."""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from ttftsim import result_shapes
from ttftsim.errors import InputError
from ttftsim.inputs.files import read_bytes, read_text
from ttftsim.inputs.structured import parse_json
from ttftsim.result_folder import MARKER, Marker, parse_marker

MAIN_FILE = {"simulation": "summary.json", "plan": "plan.json"}  # the file that makes a folder a result


class ResultError(Exception):
    """A result that cannot be shown: the message says which file and why."""


@dataclass(frozen=True)
class Incomplete:
    """A result folder without a valid completion marker: listed, never shown."""

    folder: str  # relative to the root
    kind: str  # simulation or plan
    reason: str


@dataclass(frozen=True)
class Found:
    simulations: list[str]  # folder paths relative to the root
    plans: list[str]
    accuracy: list[str]  # file paths relative to the root
    incomplete: list[Incomplete] = field(default_factory=list)


def inside(root: Path, relative: str) -> Path:
    """The path under root, resolved, refusing anything that resolves outside it (.., absolute paths, links)."""
    base = root.resolve()
    target = (base / relative).resolve()
    if target != base and base not in target.parents:
        raise ResultError(f"{relative}: outside the results folder, refused")
    return target


def _join(folder: str, name: str) -> str:
    return name if folder in ("", ".") else f"{folder}/{name}"


def discover(root: Path) -> Found:
    base = root.resolve()
    found = Found([], [], [], [])
    if not base.is_dir():
        return found
    for path in sorted(base.rglob("*.json")):
        relative = path.relative_to(base)
        hidden = any(part.startswith(".") for part in relative.parts)
        if hidden or base not in path.resolve().parents or not path.is_file():  # a FIFO would block a read
            continue
        kind = next((k for k, name in MAIN_FILE.items() if name == path.name), None)
        if kind is None:
            if path.name != MARKER and _looks_like_accuracy(path):
                found.accuracy.append(relative.as_posix())
            continue
        folder = relative.parent.as_posix()
        try:
            complete(root, folder, kind)
        except ResultError as exc:
            found.incomplete.append(Incomplete(folder, kind, str(exc)))
            continue
        (found.simulations if kind == "simulation" else found.plans).append(folder)
    return found


def _looks_like_accuracy(path: Path) -> bool:
    try:
        head = parse_json(read_text(path.resolve(), what="result file"), str(path), finite=False)
    except InputError:  # RecursionError: JSON nested too deep
        return path.name.startswith("accuracy")  # listed, so that the page can say what is wrong with it
    return isinstance(head, dict) and "stages" in head and "summary" in head


def complete(root: Path, folder: str, kind: str) -> Marker:
    """The folder's completion marker, checked: present, for this kind of result, and every file it lists
    inside the root with the recorded size. ResultError saying why the result is incomplete otherwise."""
    path = inside(root, _join(folder, MARKER))
    if not path.exists() and not path.is_symlink():
        why = f"no {MARKER} (interrupted while writing, or written before ttftsim marked results complete)"
        raise ResultError(f"{folder}: incomplete: {why}")
    try:
        marker = parse_marker(read_text(path, what="completion marker"))
    except InputError as exc:
        raise ResultError(f"{folder}: incomplete: {MARKER} unreadable ({exc.message})") from None
    except (ValueError, RecursionError) as exc:
        raise ResultError(f"{folder}: incomplete: {MARKER} unreadable ({exc})") from None
    if marker.kind != kind or MAIN_FILE[kind] not in marker.files:
        raise ResultError(f"{folder}: incomplete: its {MARKER} is not for a {kind} result")
    for name, size in sorted(marker.files.items()):
        path = inside(root, _join(folder, name))
        if not path.is_file():
            raise ResultError(f"{folder}: incomplete: {name} is missing")
        if path.stat().st_size != size:
            raise ResultError(f"{folder}: incomplete: {name} changed after it was written ({size} bytes recorded)")
    return marker


def _json(root: Path, relative: str) -> dict[str, Any]:
    path = inside(root, relative)
    if not path.is_file():
        raise ResultError(f"{relative}: not found (or not a file)")
    try:
        data = parse_json(read_text(path, what="result file"), relative, finite=False)
    except InputError as exc:  # the loader's bounds: size, UTF-8, nesting, duplicate keys (ttftsim/inputs)
        raise ResultError(exc.one_line()) from None
    if not isinstance(data, dict):
        raise ResultError(f"{relative}: expected a JSON object")
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
    inside(root, relative)
    complete(root, relative, "simulation")
    summary = _json(root, _join(relative, "summary.json"))
    requests_path, series_path = (inside(root, _join(relative, n)) for n in ("requests.parquet", "timeseries.csv"))
    try:
        requests = pd.read_parquet(io.BytesIO(read_bytes(requests_path, "trace", "requests.parquet")))
        series = pd.read_csv(io.StringIO(read_text(series_path, "trace", "timeseries.csv")))
    except InputError as exc:
        raise ResultError(f"{relative}: {exc.message}") from None
    except Exception as exc:  # a damaged Parquet or CSV: say so in the page
        raise ResultError(f"{relative}: unreadable results ({type(exc).__name__}: {exc})") from None
    try:
        result_shapes.check_summary(summary)
    except ValueError as exc:
        raise ResultError(f"{_join(relative, 'summary.json')}: {exc}") from None
    try:
        result_shapes.check_frames(requests, series)
    except ValueError as exc:
        raise ResultError(f"{relative}/{exc}") from None
    name = str((summary.get("config") or {}).get("scenario", relative))
    return Simulation(name, summary, requests, series)


@dataclass(frozen=True)
class SavedPlan:
    """A plan folder: plan.json, and the recommended deployment's manifests.yaml and README.md ('' when the
    plan has no winner, or was written before the README)."""

    data: dict[str, Any]
    manifests: str
    readme: str


def load_plan(root: Path, relative: str) -> SavedPlan:
    inside(root, relative)
    marker = complete(root, relative, "plan")
    plan = _json(root, _join(relative, "plan.json"))
    try:
        result_shapes.check_plan(plan)
    except ValueError as exc:
        raise ResultError(f"{_join(relative, 'plan.json')}: {exc}") from None
    texts = []
    for name in ("manifests.yaml", "README.md"):  # a plan without a winner has neither
        if name not in marker.files:
            texts.append("")
            continue
        try:
            text = read_bytes(inside(root, _join(relative, name)), what=name)
        except InputError as exc:
            raise ResultError(f"{relative}: {exc.message}") from None
        texts.append(text.decode("utf-8", errors="replace"))
    return SavedPlan(plan, *texts)


def load_accuracy(root: Path, relative: str) -> dict[str, Any]:
    report = _json(root, relative)
    try:
        result_shapes.check_accuracy(report)
    except ValueError as exc:
        raise ResultError(f"{relative}: not a ttftsim accuracy report ({exc})") from None
    return report


def write_report(root: Path, out: Path, summary_text: Callable[[dict[str, Any]], str] | None = None) -> list[str]:
    """Every result under root as figures in one self-contained HTML file (plotly.js embedded once), written
    to a hidden file beside out and renamed over it when done; above a simulation's charts, summary_text of its
    summary.json (the CLI passes the figures `simulate` printed; '' leaves them out). Returns what was not shown,
    and why."""
    import plotly.io as pio

    from ttftsim import figures

    check_report_target(out)
    found = discover(root)

    def simulation(relative: str) -> tuple[str, list[Any]]:
        sim = load_simulation(root, relative)
        text = summary_text(sim.summary) if summary_text is not None else ""
        shown: list[Any] = [f"<pre>{escape(text)}</pre>"] if text else []
        shown += [figures.ttft_distribution(sim.requests, sim.slo_s), figures.tpot_distribution(sim.requests)]
        shown += [figures.ttft_breakdown(sim.summary), figures.time_series(sim.series, sim.slo_s)]
        return f"Simulation: {sim.name}", shown

    def plan(relative: str) -> tuple[str, list[Any]]:
        saved = load_plan(root, relative)
        answer, deployment = _plan_section(saved)
        return f"Plan: {saved.data.get('plan')}", [*answer, figures.plan_scatter(saved.data), *deployment]

    def accuracy(relative: str) -> tuple[str, list[Any]]:
        return f"Accuracy: {relative}", [figures.accuracy_scatter(load_accuracy(root, relative))]

    sections: list[str] = []
    first = True
    problems = [item.reason for item in found.incomplete]
    kinds = ((found.simulations, simulation), (found.plans, plan), (found.accuracy, accuracy))
    for results, render in kinds:
        for relative in results:
            try:
                title, shown = render(relative)
            except ResultError as exc:
                problems.append(str(exc))
                continue
            except Exception as exc:  # a shape the checks let through: one line in the report, not a crash
                problems.append(f"{relative}: not drawn ({type(exc).__name__}: {exc})")
                continue
            sections.append(f"<h2>{escape(title)}</h2>")
            for fig in shown:  # plotly.js inline once, with the first figure; a str is HTML already escaped
                if isinstance(fig, str):
                    sections.append(fig)
                    continue
                sections.append(pio.to_html(fig, full_html=False, include_plotlyjs="inline" if first else False))
                first = False
    body = "\n".join(sections) or "<p>No results found.</p>"
    notes = "".join(f"<li>{escape(p)}</li>" for p in problems)
    html = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ttftsim report</title></head><body>"
        f"<h1>ttftsim report: {escape(root.name)}</h1>{body}"
        + (f"<h2>Not shown</h2><ul>{notes}</ul>" if notes else "")
        + "</body></html>"
    )
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    try:
        partial.write_text(html, encoding="utf-8")
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return problems


def _plan_section(saved: SavedPlan) -> tuple[list[str], list[str]]:
    """A plan's answer as escaped HTML: the recommendation in plain words, each GPU type's best (those out of
    the running in a greyed list of their own, with the bound that put them out), the candidates' table
    (rows out of the running greyed); then, after the figure, the winner's README and manifests."""
    from ttftsim import plan_view

    bests = plan_view.gpu_bests(saved.data)
    lists = []
    for title, is_out, style in (("Best per GPU type", False, ""), ("Out of the running", True, " style='color:#888'")):
        items = "".join(f"<li>{escape(g.hardware)}: {escape(g.text)}</li>" for g in bests if g.is_out == is_out)
        lists.append(f"<h3>{title}</h3><ul{style}>{items}</ul>" if items else "")
    columns = plan_view.headers(saved.data)
    head = "".join(f"<th>{escape(c['name'])}</th>" for c in columns)
    body = "".join(
        f"<tr style='color:{'inherit' if row['status'] in plan_view.IN_THE_RUNNING else '#888'}'>"
        + "".join(f"<td>{escape(_html_cell(row[c['id']]))}</td>" for c in columns)
        + "</tr>"
        for row in plan_view.table_rows(saved.data)
    )
    answer = [
        f"<p><b>{escape(plan_view.recommendation(saved.data))}</b></p>",
        *lists,
        f"<h3>Candidates</h3><table border='1' cellspacing='0' cellpadding='3'><tr>{head}</tr>{body}</table>",
    ]
    files = (("How to deploy it (README.md)", saved.readme), ("Manifests (manifests.yaml)", saved.manifests))
    return answer, [f"<h3>{escape(title)}</h3><pre>{escape(text)}</pre>" for title, text in files if text]


def _html_cell(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.4g}" if isinstance(value, float) else str(value)


def check_report_target(out: Path) -> None:
    """The report goes to a file in a folder that exists: said before any work, naming the path."""
    if out.is_dir():
        raise InputError(str(out), "", "is a folder (-o takes the HTML file to write)")
    if not out.parent.is_dir():
        missing = "does not exist" if not out.parent.exists() else "is not a folder"
        raise InputError(str(out), "", f"folder {out.parent} {missing}")
