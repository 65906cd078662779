"""A validation report in the terminal (`ttftsim validate`): the findings by severity with their fixes, the
prediction, PASS or FAIL."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console

from ttftsim.inputs.files import counted
from ttftsim.render.cells import ms, render_warnings


def render_validation(console: Console, report: Any) -> None:
    """Findings by severity, then the prediction (a ttftsim.validate.report.Report)."""
    deployment = report.deployment
    predicted = report.prediction.replicas if report.prediction is not None else deployment["replicas"]
    if deployment["model"] is None:  # the files hold no workload the checks read (named in the findings)
        console.print(f"[bold]{report.name}[/]: no vLLM workload the checks can read")
    else:
        hardware = deployment["hardware"] or "a GPU type not known (see the findings)"
        console.print(
            f"[bold]{report.name}[/]: {deployment['model']} on {hardware}, "
            f"{counted(deployment['replicas'], 'replica')}"
            + (f" (predicted with {predicted}, as its autoscaler sets)" if predicted != deployment["replicas"] else "")
        )
    colors = {"error": "red", "warning": "yellow", "info": "dim"}
    for finding in sorted(report.findings, key=lambda f: ("error", "warning", "info").index(f.severity)):
        color = colors[finding.severity]
        console.print(f"[{color}]{finding.severity:<7}[/] [{finding.check}] {finding.message}", highlight=False)
        if finding.fix:
            console.print(f"          fix: {finding.fix}", highlight=False)
    if report.prediction is not None:
        p = report.prediction
        console.print(
            f"prediction with {counted(p.replicas, 'replica')}: TTFT P50 {_ms_or_never(p.figures.ttft_p50_s)}, "
            f"P99 {_ms_or_never(p.figures.ttft_p99_s)}; kernel times: {p.kernel_costs}"
        )
    render_warnings(console, report.warnings)
    console.print("[green]PASS[/]" if report.passed else "[red]FAIL[/]")


def _ms_or_never(value: float) -> str:
    """`121.9 ms`; `never` for a percentile of requests that were never served (infinite)."""
    return f"{ms(value)} ms" if math.isfinite(value) else "never (requests unserved)"
