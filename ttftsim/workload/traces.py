"""Trace readers: Azure LLM inference CSV (absolute timestamps), Mooncake JSONL (512-token hash_ids, which
become shared prompt segments, so equal leading ids are prefix-cache hits), and a plain CSV
(arrival_s, input_tokens, output_tokens)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ttftsim.config.workload import TraceWorkload
from ttftsim.errors import InputError
from ttftsim.kvcache.hashing import Segment
from ttftsim.workload.request import ContentIds, Request

MOONCAKE_BLOCK = 512


def _read_table(path: Path, fmt: str) -> pd.DataFrame:
    """Columns arrival_s, input_tokens, output_tokens (+ hash_ids for Mooncake), arrival from 0."""
    if fmt == "azure":
        frame = pd.read_csv(path)
        _need(frame, path, ("TIMESTAMP", "ContextTokens", "GeneratedTokens"))
        stamps = pd.to_datetime(frame["TIMESTAMP"], format="mixed", utc=True)
        seconds = (stamps - stamps.min()).dt.total_seconds()
        return pd.DataFrame(
            {"arrival_s": seconds, "input_tokens": frame["ContextTokens"], "output_tokens": frame["GeneratedTokens"]}
        )
    if fmt == "mooncake":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        frame = pd.DataFrame(rows)
        _need(frame, path, ("timestamp", "input_length", "output_length", "hash_ids"))
        return pd.DataFrame(
            {
                "arrival_s": (frame["timestamp"] - frame["timestamp"].min()) / 1000.0,
                "input_tokens": frame["input_length"],
                "output_tokens": frame["output_length"],
                "hash_ids": frame["hash_ids"],
            }
        )
    frame = pd.read_csv(path)
    _need(frame, path, ("arrival_s", "input_tokens", "output_tokens"))
    return frame


def _need(frame: pd.DataFrame, path: Path, columns: tuple[str, ...]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(str(path), missing[0], f"trace column missing (found: {', '.join(map(str, frame.columns))})")


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


def load_trace(spec: TraceWorkload, base: Path, rng: np.random.Generator, content: ContentIds) -> list[Request]:
    """The trace's requests, rescaled in time, windowed, jittered within buckets when asked."""
    path = (base / spec.path).resolve()
    try:
        frame = _read_table(path, spec.format)
    except FileNotFoundError:
        raise InputError(str(path), "", "trace file not found") from None
    except (ValueError, KeyError, json.JSONDecodeError, pd.errors.ParserError) as exc:
        raise InputError(str(path), "", f"not a {spec.format} trace ({exc})") from None
    frame = frame[(frame["arrival_s"] >= spec.start_s) & (frame["input_tokens"] > 0)]
    frame = frame.sort_values("arrival_s", kind="stable")
    arrivals = (frame["arrival_s"].to_numpy(dtype=np.float64) - spec.start_s) / spec.time_scale
    if spec.jitter_s > 0:
        buckets = np.floor(arrivals / spec.jitter_s) * spec.jitter_s
        arrivals = np.sort(buckets + rng.random(len(arrivals)) * spec.jitter_s)
    keep = arrivals < spec.duration_s if spec.duration_s is not None else np.ones(len(arrivals), dtype=bool)
    inputs = frame["input_tokens"].to_numpy(dtype=np.int64)[keep]
    outputs = np.maximum(frame["output_tokens"].to_numpy(dtype=np.int64)[keep], 1)
    hash_lists = frame["hash_ids"].to_numpy()[keep] if "hash_ids" in frame.columns else None
    arrivals = arrivals[keep]
    count = len(arrivals) if spec.num_requests is None else min(spec.num_requests, len(arrivals))
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
