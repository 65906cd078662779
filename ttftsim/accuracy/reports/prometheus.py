"""vLLM's Prometheus metrics as measurements: a `/metrics` text snapshot (the exposition format; with
--before, the difference of two snapshots, i.e. the run between them) and the JSON of a range query
(`/api/v1/query_range` over the run: counters and buckets by their increase over the window, resets
counted as Prometheus's increase() does; gauges by their mean and maximum).

What the server measured (seconds): TTFT from the time_to_first_token_seconds histogram (the server's,
from the request's arrival at the API server to its first token: no client, network or response path);
TPOT from request_time_per_output_token_seconds; e2e from e2e_request_latency_seconds; and, alongside,
inter-token latency (inter_token_latency_seconds, or time_per_output_token_seconds before vLLM 0.11), queue,
prefill and decode times, tokens per iteration, and from a range query the running and waiting requests
and the KV-cache usage. Percentiles are read from the buckets (histograms.py). Requests aborted or failed
(request_success_total's finished_reason abort or error) are the failures. The server does not know how
the requests were sent: the deployment file's workload is used."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping

from ttftsim.accuracy.reports.fields import Fields, as_number
from ttftsim.accuracy.reports.histograms import Labels, SeriesKey, histogram
from ttftsim.accuracy.reports.measured import MeasuredRun, Sent, reported_truth
from ttftsim.errors import InputError
from ttftsim.inputs.files import excerpt

_SAMPLE = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\S+)?\s*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_DISTRIBUTIONS = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "queue": ("vllm:request_queue_time_seconds",),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
    "iteration_tokens": ("vllm:iteration_tokens_total",),
}
_GAUGES = {
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "kv_usage": ("vllm:kv_cache_usage_perc"),
}
_FAILED_REASONS = ("abort", "error")


def looks_like_exposition(text: str) -> bool:
    return any(line.startswith(("vllm:", "# TYPE vllm:", "# HELP vllm:")) for line in text.splitlines()[:5000])


def parse_exposition(text: str, source: str) -> dict[SeriesKey, float]:
    """The vllm:* samples of an exposition text (comments and other collectors' series skipped)."""
    values: dict[SeriesKey, float] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("vllm:"):
            continue
        match = _SAMPLE.fullmatch(line)
        if match is None:
            raise InputError(source, f"line {number}", f"not a Prometheus sample ({excerpt(line)})")
        try:
            value = float(match["value"])
            if not math.isfinite(value):
                raise ValueError(value)
        except ValueError:
            raise InputError(
                source, f"line {number} {match['name']}", f"not a finite number ({excerpt(match['value'])})"
            ) from None
        values[(match["name"], _labels(match["labels"] or "", source, number))] = value
    if not values:
        raise InputError(source, "vllm:*", "no vLLM series in the metrics (is it a vLLM server's /metrics?)")
    return values


def _labels(text: str, source: str, number: int) -> Labels:
    pairs, position = [], 0
    while position < len(text):
        match = _LABEL.match(text, position)
        if match is None or match.end() == position:
            raise InputError(source, f"line {number}", f"malformed labels ({excerpt(text[position:])})")
        pairs.append((match[1], match[2]))
        position = match.end()
    return tuple(sorted(pairs))


def difference(
    after: Mapping[SeriesKey, float], before: Mapping[SeriesKey, float], source: str
) -> dict[SeriesKey, float]:
    """after - before for counters and buckets (series ending _total, _bucket, _count, _sum); gauges as after."""
    delta = {}
    for key, value in after.items():
        if not key[0].endswith(("_total", "_bucket", "_count", "_sum")):
            delta[key] = value
            continue
        earlier = before.get(key, 0.0)
        if value < earlier:
            raise InputError(
                source, key[0], f"went down from {earlier:g} to {value:g}: the server restarted between the snapshots"
            )
        delta[key] = value - earlier
    return delta


def read_snapshot(text: str, source: str, name: str, before: tuple[str, str] | None = None) -> list[MeasuredRun]:
    values = parse_exposition(text, source)
    notes = ["a single /metrics snapshot counts everything since the server started (give --before for one run)"]
    if before is not None:
        values = difference(values, parse_exposition(before[0], before[1]), source)
        notes = [f"the run between {before[1]} and {source}"]
    return [server_run(values, {}, source, name, tuple(notes))]


def read_range(data: object, source: str, name: str) -> list[MeasuredRun]:
    """A query_range matrix of vllm:* series."""
    top = Fields(source, data)
    if top.text("status") != "success":
        raise top.error("status", f"the query did not succeed ({excerpt(top.data.get('error', ''))})")
    payload = top.child("data")
    if payload.text("resultType") != "matrix":
        raise payload.error("resultType", f"expected a range query's matrix, got {excerpt(payload.data['resultType'])}")
    increases: dict[SeriesKey, float] = {}
    gauges: dict[str, dict[float, float]] = {}
    for series in payload.children("result"):
        labels = {str(k): str(v) for k, v in series.child("metric").data.items()}
        metric = labels.pop("__name__", "")
        if not metric.startswith("vllm:"):
            continue
        points = _points(series)
        key = (metric, tuple(sorted((k, v) for k, v in labels.items() if k not in ("instance", "job"))))
        if metric.endswith(("_total", "_bucket", "_count", "_sum")):
            increases[key] = increases.get(key, 0.0) + _increase([v for _, v in points])
        else:
            by_time = gauges.setdefault(metric, {})
            for t, v in points:
                by_time[t] = by_time.get(t, 0.0) + v
    if not increases and not gauges:
        raise payload.error("result", "no vLLM series (query the raw vllm:* series, not an expression of them)")
    extras = {}
    for short, metric in _GAUGES.items():
        if metric in gauges:
            extras[f"{short}_mean"] = sum(gauges[metric].values()) / len(gauges[metric])
            extras[f"{short}_max"] = max(gauges[metric].values())
    return [server_run(increases, extras, source, name, (), repair=True)]


def _points(series: Fields) -> list[tuple[float, float]]:
    points = []
    for i, pair in enumerate(series.items("values")):
        if not isinstance(pair, list) or len(pair) != 2:
            raise series.error(f"values[{i}]", 'expected [time, "value"]')
        try:
            value = float(pair[1])
            if not math.isfinite(value):
                raise ValueError(value)
        except (TypeError, ValueError):
            raise series.error(f"values[{i}]", f"not a finite number ({excerpt(pair[1])})") from None
        points.append((as_number(pair[0], series, f"values[{i}]"), value))
    return points


def _increase(values: list[float]) -> float:
    """Growth over the window; a drop is a counter reset, after which the new value is all growth."""
    total = 0.0
    for earlier, later in itertools.pairwise(values):
        total += later - earlier if later >= earlier else later
    return total if math.isfinite(total) else 0.0


def _levelled(short: str) -> str:
    return (
        f"{short}: bucket counts that fell between bounds (series sampled apart) were levelled, as histogram_quantile"
        " does"
    )


def server_run(
    values: Mapping[SeriesKey, float],
    extras: dict[str, float],
    source: str,
    name: str,
    notes: tuple[str, ...],
    repair: bool = False,
) -> MeasuredRun:
    """The run's measured distributions from the series' values over it (repair: histograms.histogram)."""
    measured: dict[str, float] = {}
    ttft_levels: dict[float, float] = {}
    num_succeeded = 0
    for short, names in _DISTRIBUTIONS.items():
        found = next((h for h in (histogram(values, n, source, repair) for n in names) if h is not None), None)
        if found is None or found.count <= 0:
            continue
        if found.repaired:
            notes += (_levelled(short),)
        measured[f"{short}_mean"] = found.mean()
        measured |= {f"{short}_p{round(q * 100)}": found.quantile(q) for q in (0.5, 0.9, 0.99)}
        if short == "ttft":
            ttft_levels, num_succeeded = found.levels(), round(found.count)
    if "ttft_mean" not in measured:
        raise InputError(source, "vllm:time_to_first_token_seconds", "no requests in the TTFT histogram")
    failed = sum(
        v
        for (n, labels), v in values.items()
        if n == "vllm:request_success_total" and dict(labels).get("finished_reason") in _FAILED_REASONS
    )
    model = next((dict(labels).get("model_name", "") for (_, labels) in values), "")
    truth = reported_truth("server", measured | extras, ttft_levels, num_succeeded, round(failed))
    prompt, output = (
        histogram(values, "vllm:request_prompt_tokens", source, repair),
        histogram(values, "vllm:request_generation_tokens", source, repair),
    )
    for short, found in (("prompt tokens", prompt), ("output tokens", output)):
        if found is not None and found.repaired:
            notes += (_levelled(short),)
    return MeasuredRun(
        name,
        "ideal",
        model,
        None,
        Sent(),
        prompt.mean() if prompt is not None else math.nan,
        output.mean() if output is not None else math.nan,
        truth,
        notes=notes,
        server_side=True,
    )
