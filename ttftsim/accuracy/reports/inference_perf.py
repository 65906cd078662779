"""inference-perf's report folder (kubernetes-sigs/inference-perf 0.7, the client of ../shared/validation's
H100 runs): `config.yaml` (the configuration it ran, written by the tool), `stage_N_lifecycle_metrics.json`
(per load stage: load_summary, successes.latency distributions, failures) and, when the run asked for it
(report.request_lifecycle.per_request), `per_request_lifecycle_metrics.json` (every request's start and end
time, lengths and computed TTFT). Given the folder or any of those files.

One run per folder, its stages one after the other (inference-perf's LoadGenerator runs the stages of
`load.stages` in turn against the same server, so a stage meets the prefix cache the stages before it left):
the workload is the config's and each stage is compared over the requests sent in it. The sends within a
stage are drawn as the tool's load timers draw them (`load.type` constant: int(rate x duration) exponential
gaps scaled to the stage, not one every 1/rate; poisson: a Poisson count each second, spread the same way;
workload/arrivals.py). Not simulated: the pause between stages (the tool waits for the stage's last
requests, then `load.interval`, then 1 s before the next stage's first send).

- Data `shared_prefix` (`num_unique_system_prompts` x `num_users_per_system_prompt` prompts, each a group's
  system prompt of `system_prompt_len` tokens plus a `question_len`-token question, `output_len` tokens out;
  inference-perf's synthetic/shared_prefix_datagen.py shuffles the prompts once and request i sends prompt
  i mod N, i counted from each stage's start): ttftsim's `shared_prefix` workload, the same rule over the
  whole run (noted where a stage's count is not a multiple of N). Question and output length distributions
  (`question_distribution`, `output_distribution`) are simulated at their means (noted).
- Any other data type: `synthetic` with the stages' arrivals, lengths as logged per request (an empirical
  distribution) or, without the per-request file, fixed at the stages' mean prompt and output tokens (noted).

Measured, per stage: with the per-request file, the requests' own values (start order; the first
load_summary.count requests are stage 0's, and so on), TTFT as inference-perf computed it
(computed_metrics.time_to_first_token: the first chunk whose text holds a token, minus the send), TPOT as
(end-to-end - TTFT) / (output - 1); otherwise the stage's reported time_to_first_token mean and percentiles
(p0.1 ... p99.9 become the interval's reported levels) and the median TPOT from the medians of request
latency and TTFT and output_len. Failed requests are counted, not measured. Load types other than constant
and poisson (concurrent, trace and session replays) are refused (one line)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ttftsim.accuracy.ground_truth import StageTruth
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
from ttftsim.errors import InputError
from ttftsim.inputs.files import read_text
from ttftsim.inputs.structured import parse_json, parse_yaml
from ttftsim.metrics.intervals import reported_levels

CONFIG = "config.yaml"
PER_REQUEST = "per_request_lifecycle_metrics.json"
SUMMARY = "summary_lifecycle_metrics.json"
OPEN_LOOP_TYPES = ("constant", "poisson")


def looks_like_lifecycle(data: object) -> bool:
    """A summary or stage report: load_summary and successes."""
    return isinstance(data, dict) and isinstance(data.get("load_summary"), dict) and "successes" in data


def looks_like_per_request(data: object) -> bool:
    """The per-request report: a list of {start_time, end_time, error} objects with info or computed_metrics."""
    if not (isinstance(data, list) and data and isinstance(data[0], dict)):
        return False
    keys = set(data[0])
    return {"start_time", "end_time", "error"} <= keys and bool(keys & {"info", "computed_metrics"})


def is_folder(path: Path) -> bool:
    return path.is_dir() and ((path / CONFIG).is_file() or (path / SUMMARY).is_file())


def read_folder(folder: Path) -> list[MeasuredRun]:
    config_path = folder / CONFIG
    if not config_path.is_file():
        raise InputError(
            str(folder), CONFIG, "missing: inference-perf writes the configuration it ran beside its reports"
        )
    config = _config(config_path)
    load = config.child("load")
    load_type = load.text("type")
    if load_type not in OPEN_LOOP_TYPES:
        raise InputError(
            str(config_path), "load.type", f"{load_type}: not read (inference-perf's constant and poisson stages are)"
        )
    stages = load.children("stages")
    if not stages:
        raise InputError(str(config_path), "load.stages", "no stages")
    reports = [_stage_report(folder, index) for index in range(len(stages))]
    per_request = _per_request(folder / PER_REQUEST) if (folder / PER_REQUEST).is_file() else None
    early_notes: tuple[str, ...] = ()
    if per_request is not None and not any(request.has("computed_metrics") for request in per_request):
        per_request = None  # the default per_request_fields: no computed_metrics, no TTFT per request
        early_notes = ("the per-request report has no computed_metrics (per_request_fields): stage percentiles",)
    rates = [_positive(stage, "rate") for stage in stages]
    durations = [_positive(stage, "duration") for stage in stages]
    counts = [report.child("load_summary").count("count") for report in reports]
    truths, sent, notes = _truths(reports, per_request, counts, rates, durations, config)
    arrivals, shared_prefix, workload_notes = _workload(config.child("data"), load_type, rates, durations)
    if shared_prefix is None and not sent.prompt_tokens:
        workload_notes = (*workload_notes, "no per-request report: lengths fixed at the stages' means")
    server = config.child("server") if config.has("server") else None
    model = server.text("model_name") if server is not None and server.has("model_name") else ""
    run = MeasuredRun(
        folder.name,
        "inference-perf",
        model,
        Load(rate_per_s=rates[0], process="poisson" if load_type == "poisson" else "constant"),
        sent,
        mean_or_zero(sent.prompt_tokens) if sent.prompt_tokens else _mean_of(reports, "prompt_tokens"),
        mean_or_zero(sent.output_tokens) if sent.output_tokens else _mean_of(reports, "output_len"),
        truths[0],
        notes=(*early_notes, *notes, *workload_notes),
        stages=tuple(truths),
        arrivals=arrivals,
        shared_prefix=shared_prefix,
    )
    return [run]


def _positive(fields: Fields, key: str) -> float:
    value = fields.number(key)
    if value <= 0:
        raise fields.error(key, f"expected a positive number, got {value:g}")
    return value


def _config(path: Path) -> Fields:
    text = read_text(path, what="inference-perf configuration")
    return Fields(str(path), parse_yaml(text, str(path)))


def _stage_report(folder: Path, index: int) -> Fields:
    path = folder / f"stage_{index}_lifecycle_metrics.json"
    if not path.is_file():
        raise InputError(
            str(folder), path.name, f"missing: the configuration has stage {index} (report.request_lifecycle.per_stage)"
        )
    data = parse_json(read_text(path, what="inference-perf stage report"), str(path))
    if not looks_like_lifecycle(data):
        raise InputError(str(path), "load_summary", "missing: not an inference-perf lifecycle report")
    return Fields(str(path), data)


def _per_request(path: Path) -> list[Fields]:
    data = parse_json(read_text(path, what="inference-perf per-request report"), str(path))
    if not isinstance(data, list):
        raise InputError(str(path), "", "expected a list of requests")
    return [Fields(str(path), item, f"[{i}]") for i, item in enumerate(data)]


def _truths(
    reports: Sequence[Fields],
    per_request: list[Fields] | None,
    counts: Sequence[int],
    rates: Sequence[float],
    durations: Sequence[float],
    config: Fields,
) -> tuple[list[StageTruth], Sent, tuple[str, ...]]:
    windows = np.concatenate(([0.0], np.cumsum(durations)))
    labels = [f"stage {i}: {rate:g} req/s" for i, rate in enumerate(rates)]
    if per_request is None:
        output_len = _output_len(config)
        truths = [
            _reported_stage(report, label, float(windows[i]), float(windows[i + 1]), output_len)
            for i, (report, label) in enumerate(zip(reports, labels, strict=True))
        ]
        return truths, Sent(), ("no per-request report: each stage's reported percentiles",)
    if len(per_request) != sum(counts):
        raise InputError(
            per_request[0].source if per_request else PER_REQUEST,
            "",
            f"{len(per_request)} requests, but the stage reports count {sum(counts)} (load_summary.count)",
        )
    requests = sorted(per_request, key=lambda request: request.send_time("start_time"))
    first_send = requests[0].number("start_time") if requests else 0.0
    lengths = [_lengths(request) for request in requests]
    known = [prompt for prompt, _ in lengths if prompt is not None] or [1]
    fill_prompt, fill_output = round(float(np.median(known))), 1
    truths, prompts, outputs, sends = [], [], [], []
    position = 0
    for i, count in enumerate(counts):
        ttft, e2e, out, failed = [], [], [], 0
        for request, (prompt, output) in zip(
            requests[position : position + count], lengths[position : position + count], strict=True
        ):
            prompts.append(prompt if prompt is not None else fill_prompt)
            outputs.append(max(1, output) if output is not None else fill_output)
            sends.append(request.send_time("start_time") - first_send)
            metrics = request.child("computed_metrics") if request.has("computed_metrics") else None
            if request.has("error") or metrics is None or not metrics.has("time_to_first_token"):
                failed += 1  # failed, or no streamed token: nothing to measure
                continue
            ttft.append(metrics.time("time_to_first_token"))
            e2e.append(metrics.time("request_latency"))
            out.append(output or 0)
            check_request(metrics, ("time_to_first_token", "request_latency", None), ttft[-1], e2e[-1], 1)
        position += count
        stage = truth_from_requests(labels[i], ttft, e2e, out, failed)
        truths.append(replace(stage, start_s=float(windows[i]), end_s=float(windows[i + 1])))
    return truths, Sent(tuple(prompts), tuple(outputs), tuple(sends)), ()


def _lengths(request: Fields) -> tuple[int | None, int | None]:
    """A request's prompt and output tokens: from computed_metrics (per_request_fields.computed_metrics), else
    from info (per_request_fields.info); None where the report has neither (a failed request's output)."""
    prompt = output = None
    if request.has("computed_metrics"):
        metrics = request.child("computed_metrics")
        prompt = metrics.count("input_tokens") if metrics.has("input_tokens") else None
        output = metrics.count("output_tokens") if metrics.has("output_tokens") else None
    if request.has("info"):
        info = request.child("info")
        if prompt is None and info.has("input_tokens"):
            prompt = info.count("input_tokens")
        if prompt is None and info.has("request_metrics"):
            text = info.child("request_metrics").child("text")
            prompt = text.count("input_tokens") if text.has("input_tokens") else None
        response = info.child("response_metrics") if info.has("response_metrics") else None
        if output is None and response is not None and response.has("output_tokens"):
            output = response.count("output_tokens")
    return (None if prompt is None else max(1, prompt)), output


def _reported_stage(report: Fields, label: str, start: float, end: float, output_len: float | None) -> StageTruth:
    successes = report.child("successes")
    failed = report.child("failures").count("count") if report.has("failures") else 0
    succeeded = successes.count("count")
    if succeeded == 0:
        return StageTruth(label, start, end, {}, failed, {}, 0)
    latency = successes.child("latency")
    ttft = latency.child("time_to_first_token")
    e2e = latency.child("request_latency")
    measured = {
        "ttft_mean": ttft.time("mean"),
        "ttft_p50": ttft.time("median"),
        "ttft_p90": ttft.time("p90"),
        "ttft_p99": ttft.time("p99"),
        "e2e_p50": e2e.time("median"),
    }
    check_rising(ttft, {"median": measured["ttft_p50"], "p90": measured["ttft_p90"], "p99": measured["ttft_p99"]})
    if output_len is not None and output_len > 1:
        measured["tpot_p50"] = (measured["e2e_p50"] - measured["ttft_p50"]) / (output_len - 1)
    stage = reported_truth(label, measured, reported_levels(ttft.data), succeeded, failed)
    return replace(stage, start_s=start, end_s=end)


def _output_len(config: Fields) -> float | None:
    data = config.child("data")
    if data.has("shared_prefix"):
        prefix = data.child("shared_prefix")
        if prefix.has("output_distribution"):
            return prefix.child("output_distribution").number("mean")
        return prefix.number("output_len") if prefix.has("output_len") else None
    if data.has("output_distribution"):
        return data.child("output_distribution").number("mean")
    return None


def _mean_of(reports: Sequence[Fields], key: str) -> float:
    """The mean of a per-request statistic over every stage's successful requests (stage means weighted by
    their counts); 0 where no stage reports it."""
    means, weights = [], []
    for report in reports:
        successes = report.child("successes")
        if successes.has(key) and successes.child(key).has("mean") and successes.count("count") > 0:
            means.append(successes.child(key).number("mean"))
            weights.append(successes.count("count"))
    return float(np.average(means, weights=weights)) if means else 0.0


def _workload(
    data: Fields, load_type: str, rates: Sequence[float], durations: Sequence[float]
) -> tuple[dict[str, Any], dict[str, Any] | None, tuple[str, ...]]:
    """The stages' arrivals, the shared_prefix workload's fields (None for another data type) and notes."""
    arrivals = {
        "type": "stages",
        "process": f"inference-perf-{load_type}",  # the tool's own load timers (workload/arrivals.py)
        "stages": [{"rate": rate, "duration_s": duration} for rate, duration in zip(rates, durations, strict=True)],
    }
    if data.text("type") != "shared_prefix":
        return arrivals, None, ()
    prefix = data.child("shared_prefix")
    for key in ("enable_multi_turn_chat", "multimodal"):
        if prefix.has(key) and prefix.raw(key) is not False:
            raise prefix.error(key, "not simulated (single-turn text prompts are)")
    notes: list[str] = []
    lengths = {name: _length(prefix, f"{name}_len", notes) for name in ("system_prompt", "question", "output")}
    for name in ("question", "output"):
        key = f"{name}_distribution"
        if prefix.has(key):
            lengths[name] = prefix.child(key).number("mean")
            notes.append(f"{key}: simulated at its mean, {lengths[name]:g} tokens")
    groups = _first_count(prefix, "num_unique_system_prompts", "num_groups")
    per_group = _first_count(prefix, "num_users_per_system_prompt", "num_prompts_per_group")
    if any(int(rate * duration) % (groups * per_group) for rate, duration in zip(rates, durations, strict=True)):
        notes.append(
            "inference-perf starts each stage at prompt 0 (get_data per stage); simulated as one sequence, so "
            "stages whose request count is not a multiple of the prompts send other prompts after the first"
        )
    shared_prefix = {
        "num_groups": groups,
        "num_prompts_per_group": per_group,
        "system_prompt_len": max(0, round(lengths["system_prompt"])),
        "question_len": max(1, round(lengths["question"])),
        "output_len": max(1, round(lengths["output"])),
    }
    return arrivals, shared_prefix, tuple(notes)


def _length(prefix: Fields, key: str, notes: list[str]) -> float:
    """A length given as a number, or (inference-perf 0.7) as an inline distribution: its mean (noted)."""
    if isinstance(prefix.raw(key), dict):
        mean = prefix.child(key).number("mean")
        notes.append(f"{key}: a distribution, simulated at its mean, {mean:g} tokens")
        return mean
    return prefix.number(key)


def _first_count(fields: Fields, *keys: str) -> int:
    for key in keys:
        if fields.has(key):
            return max(1, fields.count(key))
    raise fields.error(keys[0], "missing from the report")


def folder_of(path: Path, data: object) -> Path | None:
    """The report folder of a file that is one of inference-perf's reports (None: it is not)."""
    if looks_like_lifecycle(data) or looks_like_per_request(data):
        return path.parent
    return None


__all__ = ["folder_of", "is_folder", "looks_like_lifecycle", "looks_like_per_request", "read_folder"]
