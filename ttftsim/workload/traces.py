"""Trace readers: Azure LLM inference CSV (absolute timestamps), Mooncake JSONL (512-token hash_ids, which
become shared prompt segments, so equal leading ids are prefix-cache hits), and a plain CSV
(arrival_s, input_tokens, output_tokens).

Every reader is total: the file goes through ttftsim/inputs (regular, within the trace size limit, UTF-8),
and each row is checked before anything is simulated: every cell present, times finite, from zero up and
in order, token counts whole numbers (prompts at least 1, outputs at least 0: a zero-token output is served
as one token, as vLLM always generates one) within the token limit, Mooncake's hash_ids one per 512-token
block. A bad row is one error naming the file, the line and the column, never a silently dropped request."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ttftsim.config.workload import TraceWorkload
from ttftsim.errors import InputError
from ttftsim.inputs.files import excerpt, read_text
from ttftsim.inputs.limits import Limits, current_limits
from ttftsim.inputs.structured import parse_json
from ttftsim.kvcache.hashing import Segment
from ttftsim.workload.request import ContentIds, Request

MOONCAKE_BLOCK = 512
COLUMNS = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "mooncake": ("timestamp", "input_length", "output_length", "hash_ids"),
    "csv": ("arrival_s", "input_tokens", "output_tokens"),
}


class _Rows:
    """A trace's columns by name (strings, or parsed JSON values for Mooncake), with the file's line of
    each row for errors."""

    def __init__(self, source: str, columns: dict[str, list[Any]], lines: list[int]) -> None:
        self.source, self.columns, self.lines = source, columns, lines

    def fail(self, row: int, column: str, message: str) -> InputError:
        return InputError(self.source, f"line {self.lines[row]} {column}", message)

    def numbers(self, column: str) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The column as finite floats; the first cell that is missing or not a number is the error."""
        raw = self.columns[column]
        values = pd.to_numeric(pd.Series(raw, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            row = int(np.argmax(bad))
            cell = raw[row]
            what = "missing" if cell in ("", None) else f"not a finite number (got {excerpt(cell)})"
            raise self.fail(row, column, what)
        return values

    def tokens(self, column: str, least: int, limits: Limits) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The column as whole token counts in [least, limits.tokens]."""
        values = self.numbers(column)
        wrong = (values != np.floor(values)) | (values < least) | (values > limits.tokens)
        if wrong.any():
            row = int(np.argmax(wrong))
            value = values[row]
            if value != math.floor(value):
                message = f"not a whole number of tokens (got {value:g})"
            elif value < least:
                message = f"must be at least {least} (got {value:g})"
            else:
                message = (
                    f"{value:,.0f} tokens is beyond the limit of {limits.tokens:,} ({limits.how_to_raise('tokens')})"
                )
            raise self.fail(row, column, message)
        return values.astype(np.int64)

    def ordered_times(self, column: str, seconds: np.ndarray[Any, np.dtype[np.float64]]) -> None:
        """Arrival times from zero up, in order (a trace is replayed as written, never re-sorted)."""
        back = np.diff(seconds) < 0
        if back.any():
            row = int(np.argmax(back)) + 1
            raise self.fail(row, column, f"times go back ({seconds[row]:g} after {seconds[row - 1]:g}); sort the trace")
        negative = seconds < 0
        if negative.any():
            row = int(np.argmax(negative))
            raise self.fail(row, column, f"a time before zero (got {seconds[row]:g})")


def _csv_rows(text: str, source: str, wanted: tuple[str, ...], limits: Limits) -> _Rows:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header:
        raise InputError(source, "", f"empty trace: expected a header line with {', '.join(wanted)}")
    missing = [name for name in wanted if name not in header]
    if missing:
        found = ", ".join(excerpt(name, 20) for name in header[:8])
        raise InputError(source, missing[0], f"trace column missing (found: {found})")
    positions = [header.index(name) for name in wanted]
    columns: dict[str, list[Any]] = {name: [] for name in wanted}
    lines: list[int] = []
    for row in reader:
        if not row:
            continue
        line = reader.line_num
        if len(row) != len(header):
            raise InputError(source, f"line {line}", f"{len(row)} cells, the header has {len(header)}")
        if len(lines) >= limits.trace_rows:
            raise InputError(source, "", _too_many_rows(limits))
        lines.append(line)
        for name, position in zip(wanted, positions, strict=True):
            columns[name].append(row[position].strip())
    return _Rows(source, columns, lines)


def _too_many_rows(limits: Limits) -> str:
    return f"more than {limits.trace_rows:,} rows ({limits.how_to_raise('trace_rows')})"


def _mooncake_rows(text: str, source: str, limits: Limits) -> _Rows:
    wanted = COLUMNS["mooncake"]
    columns: dict[str, list[Any]] = {name: [] for name in wanted}
    lines: list[int] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(lines) >= limits.trace_rows:
            raise InputError(source, "", _too_many_rows(limits))
        try:
            row = parse_json(line, source, limits)
        except InputError as exc:
            raise InputError(source, f"line {number}" + (f" {exc.field}" if exc.field else ""), exc.message) from None
        if not isinstance(row, dict):
            raise InputError(source, f"line {number}", f"expected a JSON object, got {type(row).__name__}")
        for name in wanted:
            if name not in row:
                raise InputError(source, f"line {number} {name}", "field missing")
            columns[name].append(row[name])
        lines.append(number)
    return _Rows(source, columns, lines)


def _hash_ids(rows: _Rows, inputs: np.ndarray[Any, np.dtype[np.int64]]) -> list[list[int]]:
    """Each row's hash_ids: a list of integers, one per 512-token block of its prompt."""
    out = []
    for row, (ids, prompt) in enumerate(zip(rows.columns["hash_ids"], inputs.tolist(), strict=True)):
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise rows.fail(row, "hash_ids", f"expected a list of integers, got {excerpt(ids)}")
        blocks = -(-prompt // MOONCAKE_BLOCK)
        if len(ids) != blocks:
            raise rows.fail(row, "hash_ids", f"{len(ids)} ids for {prompt} tokens ({blocks} blocks of 512)")
        out.append(ids)
    return out


MAX_TRACE_SPAN_S = 366 * 86400.0  # a trace longer than this has its times in another unit


# The tables last read, keyed by the file's whole text (with its name, format and the limits it was checked
# against), so an unchanged trace is parsed once per process: a plan simulates the same trace for every candidate
# (Mooncake's conversation trace takes 0.7 s to parse). Never changed in place (pandas copies on write).
_TABLES: dict[tuple[str, str, Limits, str], pd.DataFrame] = {}
_TABLES_KEPT = 4


def _read_table(path: Path, fmt: str, limits: Limits) -> pd.DataFrame:
    """Columns arrival_s, input_tokens, output_tokens (+ hash_ids for Mooncake), arrival from 0, checked."""
    source = str(path)
    text = read_text(path, "trace", "trace file", limits)
    key = (source, fmt, limits, text)
    table = _TABLES.get(key)
    if table is None:
        table = _TABLES[key] = _parse_table(text, source, fmt, limits)
        while len(_TABLES) > _TABLES_KEPT:
            del _TABLES[next(iter(_TABLES))]
    return table


def _parse_table(text: str, source: str, fmt: str, limits: Limits) -> pd.DataFrame:
    """The trace's text as _read_table's columns."""
    wanted = COLUMNS[fmt]
    rows = _mooncake_rows(text, source, limits) if fmt == "mooncake" else _csv_rows(text, source, wanted, limits)
    if not rows.lines:
        raise InputError(source, "", "the trace has no requests")
    time_column, input_column, output_column = wanted[:3]
    if fmt == "azure":
        stamps = pd.to_datetime(pd.Series(rows.columns[time_column]), format="mixed", utc=True, errors="coerce")
        if stamps.isna().any():
            row = int(np.argmax(stamps.isna().to_numpy()))
            raise rows.fail(row, time_column, f"not a timestamp (got {excerpt(rows.columns[time_column][row])})")
        seconds: np.ndarray[Any, np.dtype[np.float64]] = np.asarray(
            (stamps - stamps.iloc[0]).dt.total_seconds(), dtype=np.float64
        )
    else:
        seconds = rows.numbers(time_column)
    rows.ordered_times(time_column, seconds)
    if fmt == "mooncake":  # milliseconds
        seconds = (seconds - seconds[0]) / 1000.0
    elif fmt == "csv":  # from the first request, as the other formats: epoch times (1.7e9 s) stay exact
        seconds = seconds - seconds[0]
    if seconds[-1] > MAX_TRACE_SPAN_S:  # seconds: a span of years is a unit mistake (milliseconds, nanoseconds)
        last = len(seconds) - 1
        raise rows.fail(
            last,
            time_column,
            f"{seconds[-1]:.4g} s after the first request: over a year (times in seconds, not ms or ns)",
        )
    inputs = rows.tokens(input_column, 1, limits)
    frame = pd.DataFrame(
        {"arrival_s": seconds, "input_tokens": inputs, "output_tokens": rows.tokens(output_column, 0, limits)}
    )
    if fmt == "mooncake":
        frame["hash_ids"] = pd.Series(_hash_ids(rows, inputs), dtype=object)
    return frame


def _mooncake_segments(hash_ids: list[int], tokens: int, ids: dict[int, int], content: ContentIds) -> list[Segment]:
    segments = []
    for index, hash_id in enumerate(hash_ids):
        length = min(MOONCAKE_BLOCK, tokens - index * MOONCAKE_BLOCK)
        if length <= 0:
            break
        if length < MOONCAKE_BLOCK:  # a partial last block is this request's own
            segments.append((content.new(), length))
            continue
        if hash_id not in ids:
            ids[hash_id] = content.new()
        segments.append((ids[hash_id], length))
    return segments


def _arrivals(frame: pd.DataFrame, spec: TraceWorkload, rng: np.random.Generator, source: str) -> Any:
    """Scaled arrival times from start_s, jittered within buckets when asked (sorted again after jitter)."""
    arrivals = (frame["arrival_s"].to_numpy(dtype=np.float64) - spec.start_s) / spec.time_scale
    if len(arrivals) and not np.isfinite(arrivals[-1]):
        raise InputError(source, "time_scale", f"{spec.time_scale:g} scales the trace's times beyond any number")
    if spec.jitter_s > 0:
        buckets = np.floor(arrivals / spec.jitter_s) * spec.jitter_s
        arrivals = np.sort(buckets + rng.random(len(arrivals)) * spec.jitter_s)
    return arrivals


def load_trace(spec: TraceWorkload, base: Path, rng: np.random.Generator, content: ContentIds) -> list[Request]:
    """The trace's requests, rescaled in time, windowed, jittered within buckets when asked."""
    path = (base / spec.path).resolve()
    limits = current_limits()
    frame = _read_table(path, spec.format, limits)
    frame = frame[frame["arrival_s"] >= spec.start_s]
    arrivals = _arrivals(frame, spec, rng, str(path))
    keep = arrivals < spec.duration_s if spec.duration_s is not None else np.ones(len(arrivals), dtype=bool)
    inputs = frame["input_tokens"].to_numpy(dtype=np.int64)[keep]
    outputs = np.maximum(frame["output_tokens"].to_numpy(dtype=np.int64)[keep], 1)  # vLLM generates at least one
    hash_lists = frame["hash_ids"].to_numpy()[keep] if "hash_ids" in frame.columns else None
    arrivals = arrivals[keep]
    count = len(arrivals) if spec.num_requests is None else min(spec.num_requests, len(arrivals))
    if count > limits.requests:
        raise InputError(
            str(path),
            "",
            f"replays {count:,} requests, beyond the limit of {limits.requests:,} ({limits.how_to_raise('requests')})",
        )
    shared_ids: dict[int, int] = {}
    requests = []
    for i in range(count):
        prompt = int(inputs[i])
        if hash_lists is not None:
            segments = tuple(_mooncake_segments(list(hash_lists[i]), prompt, shared_ids, content))
        else:
            segments = ((content.new(), prompt),)
        requests.append(Request(i, float(arrivals[i]), prompt, int(outputs[i]), segments, private=hash_lists is None))
    return requests


def window_requests(spec: TraceWorkload, base: Path) -> list[Request]:
    """Every request of the trace's window (start_s, duration_s), num_requests aside: what a plan measures the
    trace's rate and its output-token demand on (a fixed seed: it only draws the jitter within buckets)."""
    return load_trace(spec.model_copy(update={"num_requests": None}), base, np.random.default_rng(0), ContentIds())
