"""aiperf's profile export (read on aiperf 0.13's output): the summary profile_export_aiperf.json and the
per-request records profile_export.jsonl. genai-perf's summary (profile_export_genai_perf.json) has the same
metric objects ({unit, avg, p1 .. p99, min, max, count}) and states its load as flat arguments, which are
read too; genai-perf's per-request export (perf_analyzer's profile_export.json) is another format, not read.

Load from input_config: aiperf's phases (the profiling phase: concurrency, or poisson / constant / gamma at
`rate`, gamma's smoothness k giving CV 1/sqrt(k); warm-up phases' requests before it), an older aiperf's
loadgen, or genai-perf's concurrency / request_rate (with perf_analyzer's stimulus in later versions).
Summary: TTFT mean and percentiles (p1..p99, min, max), inter_token_latency as TPOT (aiperf's is
(latency - TTFT) / (output - 1) per request), request_latency's median, the mean lengths. Records: the
profiling phase's requests' own values (a record with an error is a failure), their lengths, and for an open
loop their send times (request_start_ns), replayed; the load comes from the summary beside them
(profile_export_aiperf.json in the same folder), and without it the records are replayed as an open loop."""

from __future__ import annotations

import math
from pathlib import Path

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
from ttftsim.errors import InputError
from ttftsim.inputs.files import read_text
from ttftsim.inputs.structured import parse_json
from ttftsim.metrics.intervals import reported_levels

SUMMARY_NAME = "profile_export_aiperf.json"
_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
_RATE_PHASES = ("poisson", "constant", "gamma")


def looks_like_summary(data: object) -> bool:
    if not isinstance(data, dict):
        return False
    ttft = data.get("time_to_first_token")
    return isinstance(ttft, dict) and "unit" in ttft and "input_config" in data


def looks_like_record(data: object) -> bool:
    return isinstance(data, dict) and isinstance(data.get("metadata"), dict) and isinstance(data.get("metrics"), dict)


def read_summary(data: object, source: str, name: str) -> list[MeasuredRun]:
    summary = Fields(source, data)
    tool: ClientTool = "aiperf" if summary.has("aiperf_version") else "genai-perf"
    load, entries = _load(summary.child("input_config"))
    ttft = summary.child("time_to_first_token")
    scale = _scale(ttft)
    levels = {level: value * scale for level, value in reported_levels(ttft.data).items()}
    if ttft.has("count") and ttft.count("count") == 0:
        raise ttft.error("count", "no request was measured")
    measured = {"ttft_mean": ttft.time("avg") * scale}
    measured |= {f"ttft_{key}": ttft.time(key) * scale for key in ("p50", "p90", "p99") if ttft.has(key)}
    check_rising(ttft, {key: ttft.time(key) for key in ("min", "p50", "p90", "p99", "max") if ttft.has(key)})
    if summary.has("inter_token_latency"):
        itl = summary.child("inter_token_latency")
        measured |= {"tpot_mean": itl.time("avg") * _scale(itl)}
        measured |= {"tpot_p50": itl.time("p50") * _scale(itl)} if itl.has("p50") else {}
    if summary.has("request_latency") and summary.child("request_latency").has("p50"):
        latency = summary.child("request_latency")
        measured["e2e_p50"] = latency.time("p50") * _scale(latency)
    failed = round(summary.child("error_request_count").number("avg")) if summary.has("error_request_count") else 0
    truth = reported_truth(load.label(), measured, levels, ttft.count("count") if ttft.has("count") else 0, failed)
    lengths = [summary.child(k).number("avg") for k in ("input_sequence_length", "output_sequence_length")]
    return [MeasuredRun(name, tool, _model(summary), load, Sent(), lengths[0], lengths[1], truth, entries)]


def read_records(rows: list[Fields], source: Path, name: str) -> list[MeasuredRun]:
    """Records of one run (JSONL rows), with the load from the summary beside them when there is one."""
    beside = source.with_name(SUMMARY_NAME)
    notes: tuple[str, ...] = ()
    entries = None
    if beside.is_file() and beside != source:
        config = Fields(str(beside), parse_json(read_text(beside, what="aiperf summary"), str(beside)))
        load, entries = _load(config.child("input_config"))
        model = _model(config)
    else:
        load, model = None, ""
        notes = (f"no {SUMMARY_NAME} beside the records: their send times are replayed as an open loop",)
    measured = [r for r in rows if _phase(r) == "profiling"]
    if not measured:
        raise InputError(str(source), "metadata.benchmark_phase", "no record of the profiling phase (warm-up only)")
    warmup = len(rows) - len(measured)
    ok = [r for r in measured if r.data.get("error") is None]
    ttft = [_metric(r, "time_to_first_token") for r in ok]
    e2e = [_metric(r, "request_latency") for r in ok]
    outputs = [round(_metric(r, "output_sequence_length", tokens=True)) for r in ok]
    for r, t, e, n in zip(ok, ttft, e2e, outputs, strict=True):
        keys = ("time_to_first_token.value", "request_latency.value", "output_sequence_length.value")
        check_request(r.child("metrics"), keys, t, e, n)
    prompts = [round(_metric(r, "input_sequence_length", tokens=True)) for r in measured]
    sent_outputs = [round(_metric(r, "output_sequence_length", tokens=True, default=0.0)) for r in measured]
    starts = [r.child("metadata").send_time("request_start_ns") / 1e9 for r in measured]
    if load is None:
        load = replay_load(starts)
    if load.concurrency is not None:
        load = Load(concurrency=load.concurrency, warmup_requests=warmup)
    order = sorted(range(len(measured)), key=lambda i: starts[i])
    sends = tuple(starts[i] - starts[order[0]] for i in order) if load.rate_per_s is not None and order else ()
    sent = Sent(tuple(prompts[i] for i in order), tuple(sent_outputs[i] for i in order), sends)
    truth = truth_from_requests(load.label(), ttft, e2e, outputs, len(measured) - len(ok))
    return [
        MeasuredRun(
            name, "aiperf", model, load, sent, mean_or_zero(prompts), mean_or_zero(sent_outputs), truth, entries,
            notes=notes,
        )
    ]  # fmt: skip


def _phase(record: Fields) -> str:
    metadata = record.child("metadata")
    return metadata.text("benchmark_phase") if metadata.has("benchmark_phase") else "profiling"


def _metric(record: Fields, key: str, tokens: bool = False, default: float | None = None) -> float:
    metrics = record.child("metrics")
    if default is not None and not metrics.has(key):
        return default
    value = metrics.child(key)
    if not tokens:
        return value.time("value") * _scale(value)
    number = value.number("value")
    least = 1 if key == "input_sequence_length" else 0  # vLLM refuses an empty prompt
    if number < least:
        raise value.error("value", f"expected a number of tokens >= {least}, got {number:g}")
    return number


def _scale(stat: Fields) -> float:
    unit = stat.text("unit") if stat.has("unit") else "ms"
    if unit not in _SECONDS:
        raise stat.error("unit", f"unknown time unit {unit!r} (ns, us, ms, s)")
    return _SECONDS[unit]


def _model(summary: Fields) -> str:
    """input_config.models.items[0].name (aiperf) or input_config.model[0] (genai-perf), when there."""
    config = summary.data.get("input_config")
    config = config if isinstance(config, dict) else {}
    models = config.get("models")
    items = models.get("items") if isinstance(models, dict) else config.get("model")
    first = items[0] if isinstance(items, list) and items else None
    name = first.get("name") if isinstance(first, dict) else first
    return name if isinstance(name, str) else ""


def _load(config: Fields) -> tuple[Load, int | None]:
    """The measured phase's load and, for a synthetic dataset, its number of distinct prompts."""
    if config.has("phases"):
        return _phases(config), _entries(config)
    flat = config.child("loadgen") if config.has("loadgen") else config
    stimulus = (
        config.data.get("perf_analyzer", {}).get("stimulus")
        if isinstance(config.data.get("perf_analyzer"), dict)
        else None
    )
    if isinstance(stimulus, dict):
        flat = Fields(config.source, stimulus, config.where("perf_analyzer.stimulus"))
    warmup = flat.count("warmup_request_count") if flat.has("warmup_request_count") else 0
    if flat.has("request_rate"):
        return Load(rate_per_s=_positive(flat, "request_rate")), None
    if flat.has("concurrency"):
        return Load(concurrency=max(1, flat.count("concurrency")), warmup_requests=warmup), None
    raise config.error("", "no load found (aiperf's phases, loadgen, or genai-perf's concurrency / request_rate)")


def _phases(config: Fields) -> Load:
    phases = config.children("phases")
    profiling = [p for p in phases if p.data.get("kind", p.data.get("name")) == "profiling"]
    if len(profiling) != 1:
        raise config.error("phases", f"expected one profiling phase, found {len(profiling)}")
    phase = profiling[0]
    warmup = sum(
        p.count("requests")
        for p in phases
        if p is not phase and p.data.get("exclude_from_results") and p.has("requests")
    )
    kind = phase.text("type")
    if kind == "concurrency":
        return Load(concurrency=max(1, phase.count("concurrency")), warmup_requests=warmup)
    if kind in _RATE_PHASES:
        rate = _positive(phase, "rate")
        smoothness = phase.number("smoothness") if kind == "gamma" and phase.has("smoothness") else 1.0
        if smoothness <= 0:
            raise phase.error("smoothness", f"expected a positive shape, got {smoothness:g}")
        if kind == "gamma" and smoothness != 1.0:
            return Load(rate_per_s=rate, process="gamma", cv=1 / math.sqrt(smoothness))
        return Load(rate_per_s=rate, process="constant" if kind == "constant" else "poisson")
    raise phase.error("type", f"phase type {kind!r} is not read (concurrency, poisson, constant, gamma)")


def _entries(config: Fields) -> int | None:
    datasets = config.data.get("datasets")
    first = datasets[0] if isinstance(datasets, list) and datasets and isinstance(datasets[0], dict) else {}
    entries = first.get("entries")
    return entries if first.get("type") == "synthetic" and isinstance(entries, int) and entries > 0 else None


def _positive(fields: Fields, key: str) -> float:
    value = fields.number(key)
    if value <= 0:
        raise fields.error(key, f"expected a positive rate, got {value:g}")
    return value


def parse_records(text: str, source: str) -> list[Fields]:
    """One JSON object per non-empty line; the error names the line."""
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(Fields(source, parse_json(line, source), f"line {number}"))
            except InputError as exc:
                raise InputError(source, f"line {number}", exc.message) from None
    return rows
