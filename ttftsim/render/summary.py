"""A simulation's summary in the terminal (`ttftsim simulate`): the run, the requests, the latency table with
TTFT's intervals, the breakdown, throughput, the SLO's verdict, the cluster's figures and the warnings."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from ttftsim.inputs.files import counted
from ttftsim.render.cells import ms, render_warnings, short_coverage

if TYPE_CHECKING:
    from ttftsim.metrics.run_summary import ClusterFigures, QuantileIntervals, RunConfig, RunSummary
    from ttftsim.metrics.slo import SloVerdict


LEVEL_NAMES = {"p50": "P50", "p90": "P90", "p99": "P99", "p999": "P99.9"}


def _interval_cells(intervals: QuantileIntervals) -> list[str]:
    """The mean column (no interval) and each percentile's lo-hi order-statistic interval, in ms."""
    cells = ["-"]
    for interval in intervals.by_level().values():
        text = f"{ms(interval.lo)}-{ms(interval.hi)}" if interval.lo is not None else "-"
        cells.append(text + short_coverage(interval, intervals.confidence))
    return cells


def render_summary(console: Console, summary: RunSummary, wall_s: float | None = None) -> None:
    """The summary of a simulation (config and simulation facts set); wall_s (a run fact, not in the
    summary) ends the last line when given."""
    config, counts = summary.config, summary.requests
    assert config is not None and summary.simulation is not None
    console.print(_header(config, summary.cluster is not None))
    console.print(
        f"requests: {counts.arrived:,} arrived, {counts.finished:,} finished, {counts.rejected:,} rejected, "
        f"{counts.failed:,} failed, {counts.aborted:,} aborted, {counts.in_flight:,} in flight; "
        f"{counts.preemptions:,} preemptions"
    )
    table = Table("metric (ms)", "mean", "P50", "P90", "P99", "P99.9")
    rows = (("TTFT", summary.ttft_s), ("TPOT", summary.tpot_s), ("ITL", summary.itl_s), ("end-to-end", summary.e2e_s))
    for label, dist in rows:
        table.add_row(label, *(ms(value) for value in (dist.mean, dist.p50, dist.p90, dist.p99, dist.p999)))
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
        "TTFT breakdown (mean ms): " + ", ".join(f"{k.removesuffix('_s')} {ms(v)}" for k, v in breakdown.items())
    )
    rate = summary.throughput
    good = rate.goodput_requests_per_s  # None: no per-request target to tell a good request by
    console.print(
        f"throughput: {rate.requests_per_s:.2f} req/s, {rate.output_tokens_per_s:,.0f} output tok/s; "
        + ("" if good is None else f"goodput {good:.2f} req/s; ")
        + f"prefix-cache hit rate {summary.prefix_cache.hit_rate:.1%}"
    )
    if summary.slo is not None:
        _render_slo(console, summary.slo, summary.requests.arrived - summary.requests.finished)
    if summary.cluster is not None:
        _render_cluster(console, summary.cluster)
    render_warnings(console, summary.warnings or ())
    sim = summary.simulation
    took = f" in {wall_s:.2f} s" if wall_s is not None else ""
    console.print(f"[dim]simulated {sim.sim_end_s:.1f} s ({sim.iterations:,} iterations){took}[/]")


def summary_text(summary: dict[str, Any]) -> str:
    """A saved summary.json as the text `simulate` printed (for the HTML report); '' when the summary lacks
    what that text reads (an older or hand-edited file: the report's charts still show)."""
    import io

    from ttftsim.metrics.run_summary import RunSummary

    console = Console(record=True, width=140, file=io.StringIO(), color_system=None)
    try:
        render_summary(console, RunSummary.from_json(summary))
    except Exception:  # whatever a malformed file raises: the text is left out, not the report
        return ""
    return console.export_text()


def _header(config: RunConfig, cluster: bool) -> str:
    """'name: model on 1 x GPU (vLLM 0.15.1), N KV blocks (T tokens); kernel times: ...'; a cluster's GPUs and KV
    blocks are each replica's (its own line says how many replicas there were)."""
    version = config.engine.get("vllm_version")  # a summary written before it was recorded has none
    gpus = f"{config.engine['tp']} x {config.hardware}"
    blocks = f"{config.num_gpu_blocks:,} KV blocks ({config.kv_capacity_tokens:,} tokens)"
    return (
        f"[bold]{config.scenario}[/]: {config.model} on {'replicas of ' if cluster else ''}{gpus}"
        + (f" (vLLM {version})" if version else "")
        + f", {blocks}{' a replica' if cluster else ''}; kernel times: {config.kernel_costs}"
    )


def _render_slo(console: Console, verdict: SloVerdict, unserved: int) -> None:
    """One line per target: SLO TTFT P99 <= 500 ms: met; a class's with its priority first; a target missed says
    the figure it judged (the requests never served count as never answered, so a percentile they reach has none)."""
    for check in verdict.checks:
        state = "[green]met[/]" if check.is_met else "[red]NOT met[/]"
        if check.figure_s is not None and math.isinf(check.figure_s):
            never = "requests" if check.priority is not None else counted(unserved, "request")  # all classes'
            state += f" (no figure: {never} never served count as never answered)"
        elif not check.is_met and check.figure_s is not None and check.target != "goodput_share":
            # not the table's interpolated figure: a user seeing P99 172.6 above and "got 180" here asked why
            state += f" (got {check.figure_s * 1e3:,.0f} ms over all arrivals by nearest rank, as an SLO is judged)"
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
