"""A plan in the terminal (`ttftsim plan`): the answer in plain words, the ranked candidates, each GPU type's
best, the Pareto front, the day's HPA options and the files written."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ttftsim.inputs.files import counted
from ttftsim.render.cells import ms, render_warnings

SIZED = ("confirmed", "estimate", "missed")  # the statuses of a row with a size, a cost and figures


def _money(value: float) -> str:
    return "-" if value != value else f"${value:,.2f}"


def render_plan(console: Console, result: Any, folder: Any) -> None:
    """The answer in plain words first, then the ranked candidates, each GPU type's best and the Pareto
    front (a ttftsim.plan.run.PlanResult)."""
    _render_heading(console, result)
    if any(r.status in SIZED for r in result.rows):
        console.print(_candidates_table(result))
    else:  # an empty table looks like a rendering fault
        console.print("no candidate was sized (every one infeasible or pruned: their reasons are below)")
    _render_overview(console, result)
    if result.winner is None:
        console.print(f"[red]no candidate meets the SLOs.[/] Closest: {result.closest()}")
        render_warnings(console, list(result.warnings))
        return
    _render_recommendation(console, result.winner)
    _render_day(console, result.day_json())
    render_warnings(console, list(result.warnings))
    console.print(
        f"wrote {folder}/: {', '.join(_result_files(folder))}; and run.json (this run's facts)", soft_wrap=True
    )


def _render_heading(console: Console, result: Any) -> None:
    """The plan's question in one line (model, traffic, SLOs, how many candidates and tasks), then the answer."""
    from ttftsim.plan.explain import rate_unit, wanted

    plan = result.plan
    tokens = result.output_tokens_per_s  # the traffic's demand, at which every row is priced
    demand = f" ({tokens:,.0f} output tokens/s)" if tokens > 0 else ""
    console.print(
        f"[bold]{plan.name}[/]: {plan.model} at {plan.target_rate:g} {rate_unit(plan.workload)}{demand}, "
        f"{wanted(plan.slo)}; "
        f"{counted(len(result.rows), 'candidate')}, {result.fully_simulated} confirmed by cluster simulation; "
        f"tasks computed {result.computed}, from checkpoint {result.reused}"
    )
    if result.winner is not None:
        console.print(f"[green]recommended:[/] {result.winner.explanation}", highlight=False)


def _candidates_table(result: Any) -> Table:
    """The first 12 candidates that were simulated (confirmed, estimated or missed), in rank order."""
    from ttftsim.plan.explain import rate_unit, words

    table = Table(
        "#",
        "candidate",
        "status",
        "replicas",
        "GPUs",
        "$/hour",
        "$/M out tok",
        "P99 TTFT ms",
        "mean TPOT ms",
        "P99 TPOT ms",
        f"limit ({rate_unit(result.plan.workload)} per replica)",
    )
    shown = [r for r in result.rows if r.status in SIZED][:12]
    for rank, row in enumerate(shown, 1):
        table.add_row(
            str(rank),
            row.candidate.label(),
            row.status,
            _replicas(result.plan, row),
            str(row.gpus),
            _money(row.cost_per_hour),
            _money(row.cost_per_million_tokens),
            _ms_or_dash(row.ttft_p99_s),
            _ms_or_dash(row.tpot_mean_s),
            _ms_or_dash(row.tpot_p99_s),
            f"{words(row.binding)} @ {row.max_rate:,.2f}" if row.binding else "-",
        )
    return table


def _replicas(plan: Any, row: Any) -> str:
    """The replicas and what they are for: the peak's need, the availability's spare (N+1, min_replicas and zones:
    plan/evaluate.py replica_count), and those the confirming cluster run added while it missed."""
    from ttftsim.plan.evaluate import replica_count

    asked = replica_count(plan, row.needed)
    parts = [str(row.needed)]
    if asked > row.needed:
        parts.append(f"{asked - row.needed} for availability")
    if row.replicas > asked:
        parts.append(f"{row.replicas - asked} the cluster run added")
    return str(row.replicas) if len(parts) == 1 else f"{row.replicas} ({' + '.join(parts)})"


def _render_overview(console: Console, result: Any) -> None:
    """Every candidate counted by status, each GPU type's best, the Pareto front and whose kernel times are
    calibrated."""
    from ttftsim.plan.ranking import best_per_gpu

    counts: dict[str, int] = {}
    for row in result.rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    console.print("candidates by status: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    console.print("best per GPU type:")
    for hardware, row in best_per_gpu(result.rows).items():
        console.print(f"  {hardware}: {row.explanation}", highlight=False)
    front = ", ".join(f"{_money(r.cost_per_hour)}/h -> {r.ttft_p99_s * 1e3:,.0f} ms" for r in result.front)
    console.print(f"Pareto front (cost vs P99 TTFT): {front or '-'}")
    console.print(_kernel_times(sorted({row.candidate.hardware for row in result.rows})))


def _render_recommendation(console: Console, win: Any) -> None:
    """The winner in one line: its deployment, size, cost and predicted P99 TTFT."""
    spare = f", {win.pods_lost} pod lost in the confirming run" if win.pods_lost else ""
    if win.requests_lost:  # not judged against the SLO (plan/evaluate.py _judged)
        spare += f" ({counted(win.requests_lost, 'streaming request')} it served failed, not judged)"
    console.print(
        f"[green]recommended:[/] {win.candidate.label()} x {counted(win.replicas, 'replica')} "
        f"({counted(win.gpus, 'GPU')}, {_money(win.cost_per_hour)}/hour), "
        f"predicted P99 TTFT {win.ttft_p99_s * 1e3:,.0f} ms{spare}"
    )


def _render_day(console: Console, day: dict[str, Any] | None) -> None:
    """Over a day's traffic (a plan with one): the recommendation and each HPA option's cost, SLO-violation
    minutes and most replicas."""
    if day is not None:
        console.print(f"[green]over the day:[/] {day['recommendation']}", highlight=False)
        for option in day["options"]:
            hpa, minutes = option["option"], option["violation_minutes_per_day"]
            console.print(
                f"  HPA {hpa['min_replicas']}-{hpa['max_replicas']} on {day['metric']} {hpa['target']:g}: "
                f"{_money(option['cost_per_day_usd'])}/day, "
                f"{'?' if minutes is None else f'{minutes:,.0f}'} SLO-violation minutes/day, "
                f"up to {option['max_ready_replicas']} replicas",
                highlight=False,
            )


def _result_files(folder: Any) -> list[str]:
    """The result's files as its completion marker lists them (ttftsim/result_folder.py), plan.json first."""
    from ttftsim.result_folder import MARKER, parse_marker

    try:
        files = sorted(parse_marker((folder / MARKER).read_text(encoding="utf-8")).files)
    except (OSError, ValueError):
        return ["plan.json"]
    return sorted(files, key=lambda name: name != "plan.json")


def _ms_or_dash(value: float) -> str:
    return "-" if value != value else ms(value)


def _kernel_times(gpus: list[str]) -> str:
    """Which GPUs' kernel times come from a calibration (the default where one exists) and which from the
    roofline."""
    from ttftsim.calibration.costs import has_calibration

    calibrated = [g for g in gpus if has_calibration(g)]
    roofline = [g for g in gpus if g not in calibrated]
    parts = [f"calibrated for {', '.join(calibrated)}"] if calibrated else []
    parts += [f"roofline for {', '.join(roofline)} (no calibration)"] if roofline else []
    return "kernel times: " + "; ".join(parts)
