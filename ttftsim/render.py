"""Terminal rendering of a run summary (rich tables)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ttftsim.inputs.files import counted
from ttftsim.metrics.intervals import CONFIDENCE

if TYPE_CHECKING:
    from ttftsim.accuracy.harness import StageResult
    from ttftsim.metrics.run_summary import ClusterFigures, QuantileIntervals, RunSummary
    from ttftsim.metrics.slo import SloVerdict


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:,.1f}"


LEVEL_NAMES = {"p50": "P50", "p90": "P90", "p99": "P99", "p999": "P99.9"}


def _interval_cells(intervals: QuantileIntervals) -> list[str]:
    """The mean column (no interval) and each percentile's lo-hi order-statistic interval, in ms."""
    cells = ["-"]
    for interval in intervals.by_level().values():
        text = f"{_ms(interval.lo)}-{_ms(interval.hi)}" if interval.lo is not None else "-"
        cells.append(text + _short_coverage(interval, intervals.confidence))
    return cells


def _short_coverage(interval: Any, confidence: float = CONFIDENCE) -> str:
    """' (26%)' when too few requests give the interval less than its confidence, else nothing."""
    short = interval.coverage is not None and interval.coverage < confidence - 1e-9
    return f" ({interval.coverage:.0%})" if short else ""


def render_warnings(console: Console, warnings: Sequence[str]) -> None:
    """What a run read but did not model, one line each."""
    for warning in warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)


def render_summary(console: Console, summary: RunSummary, wall_s: float | None = None) -> None:
    """The summary of a simulation (config and simulation facts set); wall_s (a run fact, not in the
    summary) ends the last line when given."""
    config, counts = summary.config, summary.requests
    assert config is not None and summary.simulation is not None
    console.print(
        f"[bold]{config.scenario}[/]: {config.model} on {config.engine['tp']} x {config.hardware}, "
        f"{config.num_gpu_blocks:,} KV blocks ({config.kv_capacity_tokens:,} tokens); "
        f"kernel times: {config.kernel_costs}"
    )
    console.print(
        f"requests: {counts.arrived:,} arrived, {counts.finished:,} finished, {counts.rejected:,} rejected, "
        f"{counts.failed:,} failed, {counts.aborted:,} aborted, {counts.in_flight:,} in flight; "
        f"{counts.preemptions:,} preemptions"
    )
    table = Table("metric (ms)", "mean", "P50", "P90", "P99", "P99.9")
    rows = (("TTFT", summary.ttft_s), ("TPOT", summary.tpot_s), ("ITL", summary.itl_s), ("end-to-end", summary.e2e_s))
    for label, dist in rows:
        table.add_row(label, *(_ms(value) for value in (dist.mean, dist.p50, dist.p90, dist.p99, dist.p999)))
        if label == "TTFT":
            table.add_row("  95% interval", *_interval_cells(summary.ttft_interval_s))
    console.print(table)
    short = [
        f"{LEVEL_NAMES[level]} {interval.coverage:.0%}"
        for level, interval in summary.ttft_interval_s.by_level().items()
        if interval.coverage is not None and interval.coverage < summary.ttft_interval_s.confidence
    ]
    if short:  # the (NN%) beside an interval
        console.print(
            f"[dim]interval coverage below {summary.ttft_interval_s.confidence:.0%} where too few requests lie beyond "
            f"the percentile: {', '.join(short)} "
            "(the widest interval the requests allow)[/]"
        )
    breakdown = asdict(summary.ttft_breakdown_mean_s)
    console.print(
        "TTFT breakdown (mean ms): " + ", ".join(f"{k.removesuffix('_s')} {_ms(v)}" for k, v in breakdown.items())
    )
    rate = summary.throughput
    console.print(
        f"throughput: {rate.requests_per_s:.2f} req/s, {rate.output_tokens_per_s:,.0f} output tok/s; "
        f"goodput {rate.goodput_requests_per_s:.2f} req/s; prefix-cache hit rate "
        f"{summary.prefix_cache.hit_rate:.1%}"
    )
    if summary.slo is not None:
        _render_slo(console, summary.slo, summary.requests.arrived - summary.requests.finished)
    if summary.cluster is not None:
        _render_cluster(console, summary.cluster)
    render_warnings(console, summary.warnings or ())
    sim = summary.simulation
    took = f" in {wall_s:.2f} s" if wall_s is not None else ""
    console.print(f"[dim]simulated {sim.sim_end_s:.1f} s ({sim.iterations:,} iterations){took}[/]")


def _render_slo(console: Console, verdict: SloVerdict, unserved: int) -> None:
    """One line per target: SLO TTFT P99 <= 500 ms: met; a class's with its priority first; a target missed says
    the figure it judged (the requests never served count as never answered, so a percentile they reach has none)."""
    for check in verdict.checks:
        state = "[green]met[/]" if check.is_met else "[red]NOT met[/]"
        if check.figure_s is not None and math.isinf(check.figure_s):
            never = "requests" if check.priority is not None else counted(unserved, "request")  # all classes'
            state += f" (no figure: {never} never served count as never answered)"
        elif not check.is_met and check.figure_s is not None and check.target != "goodput_share":
            state += f" (got {check.figure_s * 1e3:,.0f} ms)"
        who = "" if check.priority is None else f"priority {check.priority} "
        if check.target == "goodput_share":
            figure = "-" if check.figure_s is None else f"{check.figure_s:.1%}"
            console.print(f"SLO {who}goodput >= {check.target_s:.1%} of arrivals (got {figure}): {state}")
            continue
        metric, level = check.target.removesuffix("_s").split("_")
        console.print(f"SLO {who}{metric.upper()} {level.upper()} <= {check.target_s * 1e3:.0f} ms: {state}")


def _render_cluster(console: Console, cluster: ClusterFigures) -> None:
    cold = cluster.cold_start_s
    cold_text = f"{cold.count} cold starts (median {cold.median:.0f} s)" if cold.count else "no cold starts"
    per_million = cluster.cost_per_million_output_tokens_usd
    console.print(
        f"cluster: up to {cluster.max_ready_replicas} ready replicas, {cluster.pods_created} pods created, "
        f"{cold_text}, {cluster.scale_events} HPA scale events; "
        f"{cluster.retried_requests:,} requests retried, {cluster.failed_requests:,} failed"
    )
    if cluster.pods_pending:
        console.print(f"[red]{cluster.pods_pending} pods still Pending:[/] " + "; ".join(cluster.pending_reasons))
    for reason in cluster.pods_not_starting:
        console.print(f"[red]pods in CrashLoopBackOff:[/] {reason}")
    violation = cluster.slo_violation_minutes
    console.print(
        f"cost: ${cluster.cost_usd:,.2f} ({cluster.gpu_hours:.2f} GPU-hours"
        + (f", ${per_million:.2f} per million output tokens" if per_million is not None else "")
        + ")"
        + (f"; SLO-violation minutes: {violation:.1f}" if violation is not None else "")
    )
    if cluster.controller_actions is not None:
        periods = ", ".join(f"{action} {count}" for action, count in cluster.controller_actions.items())
        console.print(f"controller periods: {periods}")
    if cluster.alerts is not None:
        alerts, missed = cluster.alerts, cluster.alerts["missed_slo_minutes"]
        console.print(
            f"alerts: {alerts['pages']} pages ({alerts['page_minutes']:.1f} min, {alerts['false_pages']} false), "
            f"{alerts['tickets']} tickets ({alerts['ticket_minutes']:.1f} min), {alerts['scale_outs']} scale-outs"
            + (f"; SLO-violation minutes no page caught: {missed:.1f}" if missed is not None else "")
        )


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
        return f"{_ms(lo)} (point)"
    return f"{_ms(lo) if lo is not None else '?'}-{_ms(hi) if hi is not None else '?'}" + _short_coverage(interval)


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
    table = Table(
        "case",
        "stage",
        *(k.replace("ttft_", "TTFT ").replace("tpot_", "TPOT ").replace(" p", " P") for k in keys),
        title="95% intervals, measured / predicted (ms), overlap",
        caption="measured percentiles: the order-statistic interval read outward from the reported percentiles "
        "(conservative); measured means have no interval (a point); predicted: order statistics of the simulated "
        "requests, means +/- 1.96 standard errors; (26%): the interval's coverage where the requests are too few "
        "for 95% (a P99 of 30 requests: at most 26%)",
    )
    for r in results:
        table.add_row(r.case, r.stage, *(_interval_cell(r, k) for k in keys))
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
    )
    if summary.get("client_bound_stages"):
        console.print(
            f"client-bound stages (shown; not in the medians, the interval or the SLO counts; the notes say why): "
            f"{summary['client_bound_stages']}"
        )
    agreement = ", ".join(f"{k} {v['agree']}/{v['stages']}" for k, v in summary["p99_slo_agreement"].items())
    console.print(f"P99 TTFT on the same side of the SLO: {agreement}")


def _money(value: float) -> str:
    return "-" if value != value else f"${value:,.2f}"


def render_plan(console: Console, result: Any, folder: Any) -> None:
    """The answer in plain words first, then the ranked candidates, each GPU type's best and the Pareto
    front (a ttftsim.plan.run.PlanResult)."""
    from ttftsim.plan.explain import wanted, words
    from ttftsim.plan.search import best_per_gpu

    plan = result.plan
    console.print(
        f"[bold]{plan.name}[/]: {plan.model} at {plan.target_rate:g} req/s, {wanted(plan.slo)}; "
        f"{counted(len(result.rows), 'candidate')}, {result.fully_simulated} confirmed by cluster simulation; "
        f"tasks computed {result.computed}, from checkpoint {result.reused}"
    )
    if result.winner is not None:
        console.print(f"[green]recommended:[/] {result.winner.explanation}", highlight=False)
    table = Table(
        "#",
        "candidate",
        "status",
        "replicas",
        "GPUs",
        "$/hour",
        "$/M tok",
        "out tok/s",
        "P99 TTFT ms",
        "mean TPOT ms",
        "P99 TPOT ms",
        "limit (req/s per replica)",
    )
    shown = [r for r in result.rows if r.status in ("confirmed", "estimate", "missed")][:12]
    for rank, row in enumerate(shown, 1):
        table.add_row(
            str(rank),
            row.candidate.label(),
            row.status,
            str(row.replicas) if row.needed == row.replicas else f"{row.replicas} ({row.needed} + spare)",
            str(row.gpus),
            _money(row.cost_per_hour),
            _money(row.cost_per_million_tokens),
            _num_or_dash(row.output_tokens_per_s),
            _ms_or_dash(row.ttft_p99_s),
            _ms_or_dash(row.tpot_mean_s),
            _ms_or_dash(row.tpot_p99_s),
            f"{words(row.binding)} @ {row.max_rate:,.2f}" if row.binding else "-",
        )
    console.print(table)
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
    if result.winner is None:
        console.print(f"[red]no candidate meets the SLOs.[/] Closest: {result.closest()}")
        render_warnings(console, list(result.warnings))
        return
    win = result.winner
    spare = f", {win.pods_lost} pod lost in the confirming run" if win.pods_lost else ""
    console.print(
        f"[green]recommended:[/] {win.candidate.label()} x {counted(win.replicas, 'replica')} "
        f"({counted(win.gpus, 'GPU')}, {_money(win.cost_per_hour)}/hour), "
        f"predicted P99 TTFT {win.ttft_p99_s * 1e3:,.0f} ms{spare}"
    )
    day = result.day_json()
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
    render_warnings(console, list(result.warnings))
    console.print(
        f"wrote {folder}/: {', '.join(_result_files(folder))}; and run.json (this run's facts)", soft_wrap=True
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
    return "-" if value != value else _ms(value)


def _num_or_dash(value: float) -> str:
    return "-" if value != value else f"{value:,.0f}"


def render_validation(console: Console, report: Any) -> None:
    """Findings by severity, then the prediction (a ttftsim.validate.report.Report)."""
    deployment = report.deployment
    predicted = report.prediction.replicas if report.prediction is not None else deployment["replicas"]
    if deployment["model"] is None:  # the files hold no workload the checks read (named in the findings)
        console.print(f"[bold]{report.name}[/]: no vLLM workload the checks can read")
    else:
        console.print(
            f"[bold]{report.name}[/]: {deployment['model']} on {deployment['hardware'] or '?'}, "
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
    return f"{_ms(value)} ms" if math.isfinite(value) else "never (requests unserved)"


def _num(value: float | None) -> str:
    if value is None or value != value:
        return "-"
    return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.0f}"


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
        change = "-" if row["relative"] is None else f"{row['relative']:+.1%}"
        table.add_row(row["metric"], _num(row["a"]), _num(row["b"]), _num(row["delta"]), change)
    console.print(table)
    slo = next((row for row in result["rows"] if row["metric"].startswith("SLO met")), None)
    for side in ("a", "b"):
        if slo is not None and slo[side] == 0.0:  # each file's own SLO block
            console.print(f"[red]{side.upper()} misses its SLO[/] ({escape(result[side + '_file'])})", soft_wrap=True)
    render_warnings(console, result.get("warnings", []))


def _kernel_times(gpus: list[str]) -> str:
    """Which GPUs' kernel times come from a calibration (the default where one exists) and which from the
    roofline."""
    from ttftsim.calibration.costs import has_calibration

    calibrated = [g for g in gpus if has_calibration(g)]
    roofline = [g for g in gpus if g not in calibrated]
    parts = [f"calibrated for {', '.join(calibrated)}"] if calibrated else []
    parts += [f"roofline for {', '.join(roofline)} (no calibration)"] if roofline else []
    return "kernel times: " + "; ".join(parts)
