"""`vllm bench serve --save-result` JSON (vLLM 0.6 to 0.32; read on 0.32's output).

Load: --request-rate with --burstiness (1: Poisson; else gamma with CV 1/sqrt(burstiness)) is an open loop;
an infinite rate with --max-concurrency c is a closed loop of c clients, and without it every request at
once (c = --num-prompts). A finite rate with --max-concurrency is read as the open loop, with a note: ttftsim
does not cap an open loop's requests in flight. --save-detailed adds per-request lists (start_times,
input_lens, output_lens, ttfts, latencies, errors): an open loop is then replayed at its logged send times
with its lengths, a closed loop samples its lengths from them, and the measured values are the requests'
own. Without them: the summary's mean_/median_/pNN_ statistics and mean lengths from the token totals.
A ramp-up (--ramp-up-strategy) is replayed with --save-detailed and skipped without it.

vLLM's start_times are time.perf_counter() readings; its duration runs from before the first send to after
the last response, so every request's send and end lie within `duration` of the first send."""

from __future__ import annotations

import math

from ttftsim.accuracy.reports.fields import Fields
from ttftsim.accuracy.reports.measured import (
    Load,
    MeasuredRun,
    Sent,
    check_request,
    check_rising,
    mean_or_zero,
    reported_truth,
    truth_from_requests,
)
from ttftsim.config.scenario import ClientTool

TOOL: ClientTool = "vllm-bench"
_SUMMARY = {"ttft_mean": "mean_ttft_ms", "ttft_p50": "median_ttft_ms", "ttft_p90": "p90_ttft_ms"}
_SUMMARY |= {"ttft_p99": "p99_ttft_ms", "tpot_p50": "median_tpot_ms", "tpot_mean": "mean_tpot_ms"}
_SUMMARY |= {"e2e_p50": "median_e2el_ms"}
_ROUNDING_S = 1e-3  # slack for a report whose times were rounded: vLLM's own are exact differences of one clock


def looks_like(data: object) -> bool:
    return isinstance(data, dict) and "num_prompts" in data and ("mean_ttft_ms" in data or "ttfts" in data)


def read(data: object, source: str, name: str) -> list[MeasuredRun]:
    fields = Fields(source, data)
    load, notes = _load(fields)
    problem = None
    if fields.has("ramp_up_strategy") and not fields.has("ttfts"):
        problem = "a ramp-up run without --save-detailed: its send times are not in the report"
    model = fields.text("model_id") if fields.has("model_id") else ""
    if fields.has("ttfts"):
        return [_detailed(fields, name, model, load, notes)]
    fields.time("mean_ttft_ms")  # the one statistic every TTFT summary has
    completed = fields.count("completed")
    measured = {key: fields.time(field) / 1e3 for key, field in _SUMMARY.items() if fields.has(field)}
    truth = reported_truth(load.label(), measured, _ttft_levels(fields), completed, _failed(fields))
    per_request = completed or 1
    return [
        MeasuredRun(
            name,
            TOOL,
            model,
            load,
            Sent(),
            fields.number("total_input_tokens") / per_request,
            fields.number("total_output_tokens") / per_request,
            truth,
            notes=notes,
            problem=problem,
        )
    ]


def _failed(fields: Fields) -> int:
    return fields.count("failed") if fields.has("failed") else 0


def _load(fields: Fields) -> tuple[Load, tuple[str, ...]]:
    rate = fields.raw("request_rate")
    concurrency = fields.count("max_concurrency") if fields.has("max_concurrency") else None
    if rate == "inf":
        clients = concurrency if concurrency is not None else fields.count("num_prompts")
        if clients < 1:
            raise fields.error("max_concurrency", "expected at least one client")
        if concurrency is None:  # vllm bench writes the key (null without --max-concurrency) since 0.7
            said = "" if "max_concurrency" in fields.data else "no max_concurrency field (an older or edited report): "
            return Load(concurrency=clients), (f"{said}every request sent at once ({clients}, request_rate inf)",)
        return Load(concurrency=clients), ()
    rate_per_s = fields.number("request_rate")
    if rate_per_s <= 0:
        raise fields.error("request_rate", f"expected a positive rate or 'inf', got {rate_per_s:g}")
    burstiness = fields.number("burstiness") if fields.has("burstiness") else 1.0
    if burstiness <= 0:
        raise fields.error("burstiness", f"expected a positive number, got {burstiness:g}")
    notes: tuple[str, ...] = ()
    if concurrency is not None:
        notes = (f"vllm bench also capped requests in flight at {concurrency} (--max-concurrency): not simulated",)
    if burstiness == 1.0:
        return Load(rate_per_s=rate_per_s), notes
    return Load(rate_per_s=rate_per_s, process="gamma", cv=1 / math.sqrt(burstiness)), notes


def _ttft_levels(fields: Fields) -> dict[float, float]:
    """Reported TTFT percentiles (pNN_ttft_ms, median_ttft_ms) as level -> seconds."""
    named = {0.5: "median_ttft_ms"} if fields.has("median_ttft_ms") else {}
    for key in fields.data:
        if key.startswith("p") and key.endswith("_ttft_ms") and key != "p_ttft_ms":
            try:
                level = float(key[1:-8]) / 100
            except ValueError:
                continue
            if 0.0 <= level <= 1.0:
                named[level] = key
    levels = {level: fields.time(key) / 1e3 for level, key in sorted(named.items())}
    check_rising(fields, {named[level]: value for level, value in levels.items()})
    return levels


def _detailed(fields: Fields, name: str, model: str, load: Load, notes: tuple[str, ...]) -> MeasuredRun:
    """Per-request lists: a request failed when its error is not empty."""
    count = fields.count("num_prompts")  # one item per request in every list
    starts = fields.send_times("start_times", count)
    ttfts, latencies = fields.times("ttfts", count), fields.times("latencies", count)
    # vLLM refuses an empty prompt; a failed request's output is 0 tokens
    prompts, outputs = fields.counts("input_lens", count, least=1), fields.counts("output_lens", count)
    _check_within_duration(fields, starts, latencies)
    errors = fields.items("errors")
    if len(errors) != count:
        raise fields.error("errors", f"expected {count} items (one per request), got {len(errors)}")
    ok = [i for i in range(count) if not errors[i]]
    if fields.has("completed") and fields.count("completed") != len(ok):
        raise fields.error("completed", f"{fields.count('completed')}, but {len(ok)} requests have no error")
    for i in ok:
        keys = (f"ttfts[{i}]", f"latencies[{i}]", f"output_lens[{i}]")
        check_request(fields, keys, ttfts[i], latencies[i], outputs[i])
    truth = truth_from_requests(
        load.label(), [ttfts[i] for i in ok], [latencies[i] for i in ok], [outputs[i] for i in ok], count - len(ok)
    )
    first = min(starts, default=0.0)
    sends = tuple(start - first for start in starts) if load.rate_per_s is not None else ()
    sent = Sent(tuple(prompts), tuple(outputs), sends)
    return MeasuredRun(name, TOOL, model, load, sent, mean_or_zero(prompts), mean_or_zero(outputs), truth, notes=notes)


def _check_within_duration(fields: Fields, starts: list[float], latencies: list[float]) -> None:
    """Every send and end within `duration` of the first send: else the send furthest from the median send is
    named (a send from another run or clock), or, when the sends fit, the latency of the request that ends last."""
    if not starts or not fields.has("duration"):
        return
    duration = fields.time("duration")
    middle = sorted(starts)[(len(starts) - 1) // 2]
    span = max(starts) - min(starts)
    if span > duration + _ROUNDING_S:
        i = max(range(len(starts)), key=lambda i: abs(starts[i] - middle))
        side = "before" if starts[i] < middle else "after"
        raise fields.error(
            f"start_times[{i}]",
            f"sent {abs(starts[i] - middle):g} s {side} the median send ({middle:g}): the sends span {span:g} s, "
            f"more than the run's duration {duration:g} s",
        )
    ends = [start + latency for start, latency in zip(starts, latencies, strict=True)]
    last = max(range(len(ends)), key=lambda i: ends[i])
    if ends[last] - min(starts) > duration + _ROUNDING_S:
        raise fields.error(
            f"latencies[{last}]",
            f"the request ends {ends[last] - min(starts):g} s after the first send, "
            f"after the run's duration {duration:g} s",
        )
