"""The cells and lines every command's terminal output shares: milliseconds, an interval's short coverage, the
warnings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape

from ttftsim.metrics.intervals import CONFIDENCE


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:,.1f}"


def short_coverage(interval: Any, confidence: float = CONFIDENCE) -> str:
    """' (26%)' when too few requests give the interval less than its confidence, else nothing."""
    short = interval.coverage is not None and interval.coverage < confidence - 1e-9
    return f" ({interval.coverage:.0%})" if short else ""


def render_warnings(console: Console, warnings: Sequence[str]) -> None:
    """What a run read but did not model, one line each."""
    for warning in warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
