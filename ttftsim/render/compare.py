"""A comparison in the terminal (`ttftsim compare`): what B changes from A, the metrics side by side, and each
side's SLO."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ttftsim.render.cells import render_warnings


def _num(value: float | None) -> str:
    """A figure: whole numbers (counts) as they are, others to two decimals below 100."""
    if value is None or value != value:
        return "-"
    text = f"{value:,.2f}" if abs(value) < 100 and not float(value).is_integer() else f"{value:,.0f}"
    return text.removeprefix("-") if text.strip("-0.,") == "" else text  # no "-0.00": a difference that rounds to 0


def _met(value: float | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def render_compare(console: Console, result: dict[str, Any]) -> None:
    console.print(
        f"[bold]A[/] {escape(result['a'])} ({escape(result['a_file'])})  vs  [bold]B[/] {escape(result['b'])} "
        f"({escape(result['b_file'])})  (traffic: {escape(result['traffic'])})",
        soft_wrap=True,
    )
    differs = result["differences"]
    console.print(
        "B differs from A in: " + "; ".join(escape(d) for d in differs)
        if differs
        else "A and B deploy the same model, hardware, engine and cluster",
        soft_wrap=True,
    )
    for note in result["notes"]:
        console.print(f"note: {escape(note)}", soft_wrap=True)
    table = Table("metric", "A", "B", "B - A", "change")
    for row in result["rows"]:
        if row["metric"].startswith("SLO met"):  # yes or no, not a quantity
            a, b = _met(row["a"]), _met(row["b"])
            label = row["metric"].split(" (")[0]  # the JSON's 1 and 0 are yes and no here
            table.add_row(label, a, b, "-", "-" if a == b or "-" in (a, b) else f"{a} -> {b}")
            continue
        change = "-" if row["relative"] is None else f"{row['relative']:+.1%}"
        table.add_row(row["metric"], _num(row["a"]), _num(row["b"]), _num(row["delta"]), change)
    console.print(table)
    slo = next((row for row in result["rows"] if row["metric"].startswith("SLO met")), None)
    for side in ("a", "b"):
        if slo is not None and slo[side] == 0.0:  # each file's own SLO block
            console.print(f"[red]{side.upper()} misses its SLO[/] ({escape(result[side + '_file'])})", soft_wrap=True)
    render_warnings(console, result.get("warnings", []))
