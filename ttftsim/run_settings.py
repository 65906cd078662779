"""What a saved simulation was run with, read back for the dashboard: the explorer's form filled from a
result (model, GPU, TP, engine knobs from summary.json's config; traffic; the SLO), and the traffic two
results were fed, so that a comparison of unlike traffic says so.

summary.json's config records the model, the GPU and the engine arguments as resolved, not the workload: the
traffic is read from config.workload where a result has it, else measured from requests.parquet (how many
requests, their mean arrival rate, mean prompt and output lengths). Two results were fed the same traffic when
their requests arrived at the same times with the same lengths; anything else is a difference worth a
warning, the same settings under another seed included (other draws)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
import pandas as pd

TRAFFIC_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


@dataclass(frozen=True)
class Traffic:
    """A run's traffic in the explorer's terms: requests, mean arrival rate, mean lengths (None: unknown)."""

    num_requests: int
    rate_per_s: float | None
    mean_prompt_tokens: float | None
    mean_output_tokens: float | None

    def words(self) -> str:
        rate = "-" if self.rate_per_s is None else f"{self.rate_per_s:,.2f}"
        prompt = "-" if self.mean_prompt_tokens is None else f"{self.mean_prompt_tokens:,.0f}"
        output = "-" if self.mean_output_tokens is None else f"{self.mean_output_tokens:,.0f}"
        return f"{self.num_requests:,} requests at {rate} req/s, mean prompt {prompt} and output {output} tokens"


@dataclass(frozen=True)
class FormSettings:
    """The explorer form's fields for a saved run (None: the run does not say), and a note on what the form
    cannot hold (a model or GPU that is no preset, traffic measured rather than set)."""

    model: str | None
    hardware: str | None
    tensor_parallel_size: int | None
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    flags: list[str]
    traffic: Traffic
    slo_ttft_p99_ms: float | None
    note: str


def measured_traffic(requests: pd.DataFrame) -> Traffic:
    """Requests, mean arrival rate ((n - 1) over the span of arrivals), mean prompt and output tokens."""
    count = len(requests)
    rate = None
    if "arrival_s" in requests and count > 1:
        arrivals = requests["arrival_s"].to_numpy(dtype=np.float64)
        span = float(np.nanmax(arrivals) - np.nanmin(arrivals))
        rate = (count - 1) / span if span > 0 else None
    return Traffic(count, rate, _mean(requests, "prompt_tokens"), _mean(requests, "output_tokens"))


def _mean(frame: pd.DataFrame, column: str) -> float | None:
    if column not in frame or not len(frame) or not pd.api.types.is_numeric_dtype(frame[column]):
        return None
    return float(frame[column].mean())


def form_settings(summary: dict[str, Any], requests: pd.DataFrame, presets: set[str], gpus: set[str]) -> FormSettings:
    """The explorer's fields for a saved run: config's model, GPU and engine arguments, the measured traffic,
    the P99 TTFT SLO; a model or GPU the form cannot offer (not in presets / gpus) is named in the note."""
    config = _object(summary.get("config"))
    engine = _object(config.get("engine"))
    notes = []
    model, hardware = _text(config.get("model")), _text(config.get("hardware"))
    for what, value, offered in (("model", model, presets), ("GPU", hardware, gpus)):
        if value is not None and value not in offered:
            notes.append(f"{what} {value} is not one the form offers: pick one to run")
    flags = [
        flag
        for flag, key in (("chunked", "enable_chunked_prefill"), ("prefix", "enable_prefix_caching"))
        if engine.get(key)
    ]
    traffic = measured_traffic(requests)
    notes.append("traffic measured from its requests (summary.json does not record the workload settings)")
    slo_s = _object(summary.get("slo")).get("ttft_p99_s")
    return FormSettings(
        model=model,
        hardware=hardware,
        tensor_parallel_size=_count(engine.get("tp", engine.get("tensor_parallel_size"))),
        max_num_seqs=_count(engine.get("max_num_seqs")),
        max_num_batched_tokens=_count(engine.get("max_num_batched_tokens")),
        flags=flags,
        traffic=traffic,
        slo_ttft_p99_ms=float(slo_s) * 1e3 if _is_number(slo_s) else None,
        note="; ".join(notes),
    )


def traffic_difference(first: pd.DataFrame, second: pd.DataFrame) -> str:
    """'' when both runs were fed the same requests (same arrival times and lengths); otherwise a line
    saying how the traffic differs."""
    columns = [c for c in TRAFFIC_COLUMNS if c in first and c in second]
    if columns and len(first) == len(second):
        a = first.sort_values(columns)[columns].to_numpy(dtype=np.float64)
        b = second.sort_values(columns)[columns].to_numpy(dtype=np.float64)
        if np.allclose(a, b, rtol=1e-9, atol=1e-9, equal_nan=True):
            return ""
    one, other = measured_traffic(first), measured_traffic(second)
    same = one == other
    detail = "the same counts and means, other draws (another seed?)" if same else f"A {one.words()}; B {other.words()}"
    return f"The two runs were not fed the same traffic: {detail}. Their latencies are not a like-for-like comparison."


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: Any) -> int | None:
    return int(value) if _is_number(value) and value >= 1 else None


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value
