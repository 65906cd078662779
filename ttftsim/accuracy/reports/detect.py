"""Which report a file is, from its content (not its name): a JSON document is told by its fields (vLLM
benchmark: num_prompts with mean_ttft_ms or ttfts; GuideLLM: benchmarks and metadata.guidellm_version;
aiperf / genai-perf summary: time_to_first_token {unit ...} with input_config; Prometheus: a query result
with data.resultType), JSON lines of {metadata, metrics} are aiperf records, text in the Prometheus
exposition format is a /metrics snapshot; inference-perf's report folder is told by its config.yaml or summary,
and its lifecycle reports (load_summary with successes) and per-request list ({start_time, end_time, error}
with info or computed_metrics) lead to their folder. The measured-deployment files of ../shared/validation (a JSON list
of open-loop runs, a CSV of closed-loop points) are `legacy`: read_ground_truth reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ttftsim.accuracy.reports import aiperf, guidellm, inference_perf, prometheus, vllm_bench
from ttftsim.accuracy.reports.measured import MeasuredRun
from ttftsim.errors import InputError
from ttftsim.inputs.files import read_text
from ttftsim.inputs.structured import parse_json

Format = Literal[
    "legacy", "vllm-bench", "guidellm", "aiperf", "aiperf-records", "prometheus", "prometheus-range", "inference-perf"
]
_EXPOSITION_LINE = re.compile(r"#.*|[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})?[ \t]+\S+([ \t]+\S+)?\s*")
_LEGACY_CSV_COLUMNS = ("concurrency", "isl", "osl")
KNOWN = (
    "vllm bench serve --save-result JSON, GuideLLM's benchmark JSON, inference-perf's report folder (or one of its "
    "*_lifecycle_metrics.json), aiperf's profile_export_aiperf.json or "
    "profile_export.jsonl, genai-perf's profile_export_genai_perf.json, a vLLM /metrics snapshot, a Prometheus "
    "query_range JSON, or the measured-run JSON list / closed-loop CSV of ../shared/validation"
)


@dataclass(frozen=True)
class Report:
    """What the file is and, unless it is a legacy ground-truth file, its runs."""

    format: Format
    runs: list[MeasuredRun]


def read_report(path: Path, before: Path | None = None) -> Report:
    source = str(path)
    if inference_perf.is_folder(path):
        if before is not None:
            raise InputError("--before", "", f"is for a /metrics snapshot: the report ({source}) is not one")
        return Report("inference-perf", inference_perf.read_folder(path))
    if path.is_dir():  # a folder that is not an inference-perf report's
        raise InputError(
            source, "", f"a folder without {inference_perf.CONFIG} or {inference_perf.SUMMARY}: ttftsim reads a folder "
            "as an inference-perf report (its config and stage_N_lifecycle_metrics.json files); give a report file "
            "otherwise",
        )  # fmt: skip
    text = read_text(path, what="report file")
    name = path.stem
    if before is not None and not _is_exposition(text):
        raise InputError("--before", "", f"is for a /metrics snapshot: the report ({source}) is not one")
    if text.lstrip().startswith(("{", "[")):
        return _json_report(text, path, name)
    if _is_exposition(text):
        earlier = None if before is None else (read_text(before, what="metrics snapshot"), str(before))
        return Report("prometheus", prometheus.read_snapshot(text, source, name, earlier))
    header = text.split("\n", 1)[0].lower()
    if all(column in header for column in _LEGACY_CSV_COLUMNS):
        return Report("legacy", [])
    raise InputError(source, "", f"not a report ttftsim reads (expected {KNOWN})")


def _json_report(text: str, path: Path, name: str) -> Report:
    source = str(path)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].lstrip().startswith("{") and _parses(lines[0], source):
        rows = aiperf.parse_records(text, source)
        if all(aiperf.looks_like_record(row.data) for row in rows):
            return Report("aiperf-records", aiperf.read_records(rows, path, name))
    data = parse_json(text, source)
    folder = inference_perf.folder_of(path, data)
    if folder is not None:
        return Report("inference-perf", inference_perf.read_folder(folder))
    if isinstance(data, list):
        if path.suffix.lower() != ".json":
            raise InputError(source, "", "a JSON list of measured runs must be named .json")
        return Report("legacy", [])
    if isinstance(data, dict) and "experiments" in data:
        raise InputError(
            source, "experiments", "genai-perf's per-request export is not read: give its summary, "
            "profile_export_genai_perf.json",
        )  # fmt: skip
    if aiperf.looks_like_record(data):
        return Report("aiperf-records", aiperf.read_records([aiperf.parse_records(text, source)[0]], path, name))
    return _json_document(data, source, name)


def _json_document(data: object, source: str, name: str) -> Report:
    if vllm_bench.looks_like(data):
        return Report("vllm-bench", vllm_bench.read(data, source, name))
    if guidellm.looks_like(data):
        return Report("guidellm", guidellm.read(data, source, name))
    if aiperf.looks_like_summary(data):
        return Report("aiperf", aiperf.read_summary(data, source, name))
    if isinstance(data, dict) and isinstance(data.get("data"), dict) and "resultType" in data["data"]:
        return Report("prometheus-range", prometheus.read_range(data, source, name))
    raise InputError(source, "", f"not a report ttftsim reads (expected {KNOWN})")


def _parses(line: str, source: str) -> bool:
    try:
        parse_json(line, source)
    except InputError:
        return False
    return True


def is_metrics_snapshot(path: Path) -> bool:
    """Whether the report is a /metrics snapshot (the report a --before goes with)."""
    return not inference_perf.is_folder(path) and _is_exposition(read_text(path, what="report file"))


def _is_exposition(text: str) -> bool:
    """The first non-empty lines are exposition comments or samples (name{labels} value)."""
    lines = [line for line in text.splitlines()[:50] if line.strip()][:5]
    return bool(lines) and all(_EXPOSITION_LINE.fullmatch(line) for line in lines)
