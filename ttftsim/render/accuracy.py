"""An accuracy run in the terminal (`ttftsim measure`): measured against predicted by case and stage, their 95%
intervals, and the error medians."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from ttftsim.render.cells import ms, short_coverage

if TYPE_CHECKING:
    from ttftsim.accuracy.harness import StageResult


def _pair(result: StageResult, key: str) -> str:
    measured, predicted = result.measured.get(key), result.predicted.get(key)
    if measured is None or predicted is None:
        return "-"
    return f"{measured * 1e3:,.1f} / {predicted * 1e3:,.1f}"


def _interval(interval: Any) -> str:
    lo, hi = interval.lo, interval.hi
    if lo is None and hi is None:
        return "-"
    if lo == hi and interval.coverage is None:
        return f"{ms(lo)} (point)"
    return f"{ms(lo) if lo is not None else '?'}-{ms(hi) if hi is not None else '?'}" + short_coverage(interval)


def _interval_cell(result: StageResult, key: str) -> str:
    """measured / predicted 95% interval (ms) and whether they overlap."""
    pair = result.intervals.get(key)
    if pair is None:
        return "-"
    verdict = {True: "[green]yes[/]", False: "[red]no[/]", None: "?"}[pair.overlap]
    return f"{_interval(pair.measured)} / {_interval(pair.predicted)} {verdict}"


def _render_interval_table(console: Console, results: list[StageResult]) -> None:
    keys = [
        k
        for k in ("ttft_p50", "ttft_p90", "ttft_p99", "ttft_mean", "tpot_mean")
        if any(k in r.intervals for r in results)
    ]
    if not keys:
        return
    rows = [(r.case, r.stage, *(_interval_cell(r, k) for k in keys)) for r in results]
    short = [cell for row in rows for cell in row[2:] if "%)" in cell]
    table = Table(
        "case",
        "stage",
        *(k.replace("ttft_", "TTFT ").replace("tpot_", "TPOT ").replace(" p", " P") for k in keys),
        title="95% intervals, measured / predicted (ms), overlap",
        caption="measured percentiles: the order-statistic interval, exact where the report has every request, else "
        "read outward from its reported percentiles (conservative); measured means have no interval (a point); "
        "predicted: order statistics of the simulated requests, means +/- 1.96 standard errors"
        + ("; (26%): the interval's coverage where the requests are too few for 95% (a P99 of 30 requests: at most "
           "26%)" if short else ""),
    )  # fmt: skip
    for row in rows:
        table.add_row(*row)
    console.print(table)


def render_accuracy(console: Console, results: list[StageResult], summary: dict[str, Any]) -> None:
    table = Table(
        "case", "stage", "TTFT mean", "P50", "P90", "P99", "TPOT", "overload", title="measured / predicted (ms)"
    )
    for r in results:
        tpot = "tpot_p50" if "tpot_p50" in r.measured else "tpot_mean"
        flag = ("yes" if r.measured_overloaded else "no") + "/" + ("yes" if r.predicted_overloaded else "no")
        stage = f"{r.stage} (client-bound)" if r.measured_client_bound else r.stage
        table.add_row(
            r.case, stage, *(_pair(r, k) for k in ("ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99", tpot)), flag
        )
    console.print(table)
    _render_interval_table(console, results)
    for metric, stats in summary["metrics"].items():
        console.print(
            f"{metric}: median APE {stats['median_ape']:.1%}, P90 {stats['p90_ape']:.1%} over {stats['stages']} stages"
        )
    if not summary["metrics"]:
        console.print("no scored stages: every stage was measured overloaded or client-bound (no error medians)")
    overlap = summary.get("interval_overlap", {}).get("metrics", {})
    if overlap:
        console.print(
            "95% intervals overlap (scored stages; a measured mean must lie inside the predicted interval): "
            + ", ".join(f"{k} {v['overlap']}/{v['stages']}" for k, v in overlap.items())
        )
    console.print(
        f"overloaded stages predicted overloaded: {summary['overloaded_predicted_overloaded']}"
        f"/{summary['overloaded_stages']}; false overloads: {summary['false_overload']}"
        + (
            f" (measured overloaded: {summary['overloaded_rule']}; such a stage is shown, not scored)"
            if summary["overloaded_stages"]
            else ""
        )
    )
    if summary.get("client_bound_stages"):
        console.print(
            f"client-bound stages (shown; not in the medians, the interval or the SLO counts; the notes say why): "
            f"{summary['client_bound_stages']}"
        )
    agreement = ", ".join(f"{k} {v['agree']}/{v['stages']}" for k, v in summary["p99_slo_agreement"].items())
    console.print(f"P99 TTFT on the same side of the SLO: {agreement}")
