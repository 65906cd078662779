"""GuideLLM's benchmark report JSON (`guidellm run --output kind=json`; 0.8.x, read on 0.8.1's output). Each
benchmark of the report (a sweep has several) is a run.

Load from the benchmark's config.strategy: synchronous is one client, concurrent `streams` clients,
throughput `max_concurrency` clients (every request at once without it), constant and poisson an open loop
at `rate`, trace a replay. Per request (requests.successful / errored / incomplete): request_start_time,
time_to_first_token_ms, request_latency, prompt_tokens, output_tokens. When the lists hold every request
(no --sample-size), an open loop is replayed at its logged send times (GuideLLM 0.8.1's poisson profile
sends everything at once: the replay sends what it sent) and the measured values are the successful
requests' own; otherwise the benchmark's metrics (time_to_first_token_ms.successful: mean, median,
p001..p999) and the mean lengths. GuideLLM's percentiles are not numpy's linear ones: from the requests
they are recomputed as the simulation's are. A warm-up, cool-down or ramp-up is noted, not simulated."""

from __future__ import annotations

from ttftsim.accuracy.reports.fields import Fields
from ttftsim.accuracy.reports.measured import (
    Load,
    MeasuredRun,
    Sent,
    check_request,
    check_rising,
    mean_or_zero,
    replay_load,
    reported_truth,
    truth_from_requests,
)
from ttftsim.config.scenario import ClientTool

TOOL: ClientTool = "guidellm"
_STATUSES = ("successful", "errored", "incomplete")
_LEVELS = {"p001": 0.001, "p01": 0.01, "p05": 0.05, "p10": 0.1, "p25": 0.25, "p50": 0.5}
_LEVELS |= {"p75": 0.75, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def looks_like(data: object) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("benchmarks"), list)
        and "guidellm_version" in str(data.get("metadata", ""))
    )


def read(data: object, source: str, name: str) -> list[MeasuredRun]:
    report = Fields(source, data)
    benchmarks = report.children("benchmarks")
    if not benchmarks:
        raise report.error("benchmarks", "the report has no benchmarks")
    model = _model(report)
    return [_benchmark(b, f"{name} #{i}" if len(benchmarks) > 1 else name, model) for i, b in enumerate(benchmarks)]


def _model(report: Fields) -> str:
    """config.spec.backend.model, when the report has it."""
    value: object = report.data
    for key in ("config", "spec", "backend", "model"):
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) else ""


def _load(config: Fields, num_requests: int) -> tuple[Load | None, tuple[str, ...]]:
    """The strategy's load (None: a trace, replayed at its send times) and what is not simulated."""
    strategy = config.child("strategy")
    kind = strategy.text("type_")
    notes = []
    if strategy.has("rampup_duration") and strategy.number("rampup_duration") > 0:
        notes.append(f"GuideLLM ramped its clients up over {strategy.number('rampup_duration'):g} s: not simulated")
    for phase in ("warmup", "cooldown"):
        spec = config.data.get(phase)
        if isinstance(spec, dict) and (spec.get("value") is not None or spec.get("percent") is not None):
            notes.append(f"GuideLLM's {phase} left requests out of the report: not simulated")
    if kind == "synchronous":
        return Load(concurrency=1), tuple(notes)
    if kind == "concurrent":
        return Load(concurrency=max(1, strategy.count("streams"))), tuple(notes)
    if kind == "throughput":
        limit = strategy.count("max_concurrency") if strategy.has("max_concurrency") else num_requests
        return Load(concurrency=max(1, limit)), tuple(notes)
    if kind in ("constant", "poisson"):
        rate = strategy.number("rate")
        if rate <= 0:
            raise strategy.error("rate", f"expected a positive rate, got {rate:g}")
        return Load(rate_per_s=rate, process="constant" if kind == "constant" else "poisson"), tuple(notes)
    if kind == "trace":
        return None, tuple(notes)
    raise strategy.error("type_", f"unknown GuideLLM strategy {kind!r}")


def _benchmark(bench: Fields, name: str, model: str) -> MeasuredRun:
    requests = bench.child("requests")
    totals = bench.child("metrics").child("request_totals")
    lists = {status: requests.children(status) if requests.has(status) else [] for status in _STATUSES}
    logged = sum(len(items) for items in lists.values())
    expected = sum(totals.count(status) for status in _STATUSES)
    load, notes = _load(bench.child("config"), expected)
    if logged < expected:
        return _from_metrics(bench, name, model, load, (*notes, f"the report samples {logged} of {expected} requests"))
    ok = lists["successful"]
    ttft = [r.time("time_to_first_token_ms") / 1e3 for r in ok]
    e2e = [r.time("request_latency") for r in ok]
    outputs = [r.count("output_tokens") for r in ok]
    for r in ok:  # a served request has its prompt's length (only an errored one may lack it: left out of `sent`)
        r.count("prompt_tokens")
    for r, t, e, n in zip(ok, ttft, e2e, outputs, strict=True):
        check_request(r, ("time_to_first_token_ms", "request_latency", "output_tokens"), t, e, n)
    sent = _sent(lists, open_loop=load is None or load.rate_per_s is not None)
    problem = "a trace replay whose send times are not all in the report" if load is None and not sent.send_s else None
    load = replay_load(sent.send_s) if load is None else load
    truth = truth_from_requests(load.label(), ttft, e2e, outputs, len(lists["errored"]) + len(lists["incomplete"]))
    return MeasuredRun(
        name, TOOL, model, load, sent, mean_or_zero(sent.prompt_tokens), mean_or_zero(sent.output_tokens), truth,
        notes=notes, problem=problem,
    )  # fmt: skip


def _sent(lists: dict[str, list[Fields]], open_loop: bool) -> Sent:
    """Every request with its prompt length, in send order (an errored one: its output as far as it got)."""
    rows = []
    for items in lists.values():
        for r in items:
            if not r.has("prompt_tokens"):
                continue
            start = r.send_time("request_start_time") if r.has("request_start_time") else None
            outputs = r.count("output_tokens") if r.has("output_tokens") else 0
            rows.append((start, r.count("prompt_tokens"), outputs))
    timed = [row for row in rows if row[0] is not None]
    if not open_loop or len(timed) < len(rows):
        return Sent(tuple(p for _, p, _ in rows), tuple(o for _, _, o in rows))
    timed.sort(key=lambda row: row[0] or 0.0)
    first = timed[0][0] if timed else 0.0
    return Sent(
        tuple(p for _, p, _ in timed),
        tuple(o for _, _, o in timed),
        tuple((t or 0.0) - (first or 0.0) for t, _, _ in timed),
    )


def _from_metrics(bench: Fields, name: str, model: str, load: Load | None, notes: tuple[str, ...]) -> MeasuredRun:
    metrics = bench.child("metrics")
    ttft = metrics.child("time_to_first_token_ms").child("successful")
    percentiles = ttft.child("percentiles")
    levels = {level: percentiles.time(key) / 1e3 for key, level in _LEVELS.items() if percentiles.has(key)}
    check_rising(percentiles, {key: levels[level] for key, level in _LEVELS.items() if level in levels})
    measured = {"ttft_mean": ttft.time("mean") / 1e3, "ttft_p50": ttft.time("median") / 1e3}
    measured |= {f"ttft_p{round(q * 100)}": levels[q] for q in (0.9, 0.99) if q in levels}
    itl = metrics.child("inter_token_latency_ms").child("successful")
    measured |= {"tpot_p50": itl.time("median") / 1e3, "tpot_mean": itl.time("mean") / 1e3}
    measured["e2e_p50"] = metrics.child("request_latency").child("successful").time("median")
    totals = metrics.child("request_totals")
    tokens = (
        metrics.child("prompt_token_count").child("successful"),
        metrics.child("output_token_count").child("successful"),
    )
    if load is None:
        return MeasuredRun(
            name, TOOL, model, None, Sent(), 0.0, 0.0, reported_truth("trace", measured, levels, 0, 0),
            problem="a sampled trace replay: the send times of the requests left out are not in the report",
        )  # fmt: skip
    truth = reported_truth(
        load.label(), measured, levels, totals.count("successful"), totals.count("errored") + totals.count("incomplete")
    )
    return MeasuredRun(
        name, TOOL, model, load, Sent(), tokens[0].number("mean"), tokens[1].number("mean"), truth, notes=notes
    )
