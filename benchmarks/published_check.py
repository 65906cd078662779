"""Predictions against the single published TTFT numbers of ../shared/validation/published_ttft.csv.

The file's 32 rows come from vendor pages, blogs and benchmark READMEs: lower trust, engine versions and workloads
often underspecified (the file's README: "for sanity checks, not for fitting"). Each row is either simulated as a
user would write its deployment (`ttftsim simulate`, kernel costs `auto`, every engine argument not named in the
row at the vLLM default of the release assumed) or listed with why it is not: another engine, a vLLM release older
than any modelled, a model without a preset, a deployment that does not start at the stated settings. Nothing is
fitted to these numbers.

    python benchmarks/published_check.py        # prints the table, writes docs/published-ttft.md (~2 min)
"""

from __future__ import annotations

import csv
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttftsim.config.scenario import Scenario
from ttftsim.errors import InputError
from ttftsim.shared_data import shared_dir
from ttftsim.simulate import simulate

OUT = Path(__file__).resolve().parents[1] / "docs" / "published-ttft.md"


@dataclass(frozen=True)
class Case:
    """How a row is simulated: its deployment and load, what was assumed, and the statistic it reports."""

    model: str
    hardware: str
    engine: dict[str, Any]
    workload: dict[str, Any]
    assumed: str
    statistic: str = "p50"  # of the simulated TTFTs: p50 (the row's P50 or mean: one lone request at a time), max
    seeds: tuple[int, ...] = (0,)
    extra: dict[str, Any] = field(default_factory=dict)


def _single_prefill(model: str, hardware: str, tp: int, prompt: int, version: str, assumed: str) -> Case:
    """One request alone (three, a minute apart: no queueing), one output token: its TTFT is the cold prefill."""
    return Case(
        model,
        hardware,
        {"vllm_version": version, "tensor_parallel_size": tp, "max_model_len": max(4096, prompt + 128)},
        {
            "type": "synthetic",
            "arrivals": {"type": "constant", "rate": 1 / 60},
            "prompt_tokens": {"type": "fixed", "value": prompt},
            "output_tokens": {"type": "fixed", "value": 1},
            "num_requests": 3,
        },
        assumed,
    )


def _fp8_kv_blog(kv: str) -> Case:
    return Case(
        "Llama-3.1-8B",
        "H100-SXM5-80GB",
        {"vllm_version": "0.19.0", "max_model_len": 32768, "kv_cache_dtype": kv},
        {
            "type": "synthetic",
            "arrivals": {"type": "closed_loop", "clients": 8},
            "prompt_tokens": {"type": "uniform", "low": 17000, "high": 23000},
            "output_tokens": {"type": "uniform", "low": 1700, "high": 2300},
            "num_requests": 150,
        },
        "vLLM 0.19 (the blog's month); lengths uniform within the stated +-15%; max_model_len 32768",
        seeds=(0, 1, 2),
    )


SPLITWISE = "Splitwise's 2023 stack (engine not named) run as vLLM 0.15 defaults; TTFT includes the API server's few ms"

# row number in published_ttft.csv (0-based, header excluded) -> how it is simulated
CASES: dict[int, Case] = {
    16: _fp8_kv_blog("auto"),
    17: _fp8_kv_blog("fp8"),
    18: _single_prefill("Llama-3.1-8B", "H100-SXM5-80GB", 1, 10_000, "0.12.0", "vLLM 0.12 as the row says (~)"),
    19: _single_prefill("Llama-3.1-8B", "H100-SXM5-80GB", 1, 50_000, "0.12.0", "vLLM 0.12 as the row says (~)"),
    20: _single_prefill("Llama-3.1-8B", "H100-SXM5-80GB", 1, 100_000, "0.12.0", "vLLM 0.12 as the row says (~)"),
    21: _single_prefill("Llama-2-70b-hf", "A100-SXM4-80GB", 4, 1024, "0.15.1", SPLITWISE),
    22: _single_prefill("Llama-2-70b-hf", "A100-SXM4-80GB", 8, 8192, "0.15.1", SPLITWISE),
    23: _single_prefill("Llama-2-70b-hf", "H100-SXM5-80GB", 4, 1024, "0.15.1", SPLITWISE),
    24: _single_prefill("Llama-2-70b-hf", "H100-SXM5-80GB", 8, 8192, "0.15.1", SPLITWISE),
    25: _single_prefill("Llama-2-70b-hf", "H100-SXM5-80GB", 2, 2048, "0.15.1", SPLITWISE),
    26: _single_prefill("Llama-2-70b-hf", "A100-SXM4-80GB", 2, 2048, "0.15.1", SPLITWISE),
    27: Case(
        "Llama-2-70b-hf",
        "H100-SXM5-80GB",
        {"vllm_version": "0.15.1", "tensor_parallel_size": 8, "max_num_batched_tokens": 8192},
        {
            "type": "synthetic",
            "arrivals": {"type": "closed_loop", "clients": 16},
            "prompt_tokens": {"type": "fixed", "value": 512},
            "output_tokens": {"type": "fixed", "value": 1},
            "num_requests": 16,
        },
        SPLITWISE + "; the 16 prompts sent at once (16 clients), prefilled in one 8192-token step; the last one's TTFT",
        statistic="max",
    ),
    29: Case(
        "Llama-3.3-70B-Instruct",
        "H100-SXM5-80GB",
        {"vllm_version": "0.18.0", "quantization": "fp8"},
        {
            "type": "synthetic",
            "arrivals": {"type": "closed_loop", "clients": 10},
            "prompt_tokens": {"type": "fixed", "value": 512},
            "output_tokens": {"type": "fixed", "value": 256},
            "num_requests": 200,
        },
        "vLLM 0.18 defaults at TP 1, as the row says",
    ),
}


def _why_not(row: dict[str, str]) -> str:
    engine = row["engine"]
    if not engine.startswith("vLLM") and not engine.startswith("not stated"):
        return f"another engine ({engine}); ttftsim models vLLM"
    if engine.startswith("vLLM 0.6"):
        return "vLLM 0.6 (the V0 engine, --num-scheduler-steps 10): older than every modelled release (0.10 on)"
    if row["model"].startswith("BLOOM"):
        return "BLOOM-176B has no model preset (ALiBi attention, not modelled)"
    return "not simulated"


def _run(case: Case, number: int) -> tuple[float | None, str]:
    """The row's statistic of the simulated TTFT in ms (seeds pooled), or why there is none."""
    values: list[float] = []
    for seed in case.seeds:
        scenario = Scenario.model_validate(
            {"model": case.model, "hardware": case.hardware, "engine": case.engine, "workload": case.workload}
            | case.extra
            | {"seed": seed}
        )
        try:
            result = simulate(scenario, source=f"row {number}")
        except InputError as exc:
            return None, exc.message
        requests = result.requests
        values += [float(v) * 1e3 for v in requests[requests.status == "finished"]["ttft_s"]]
    if not values:
        return None, "no request finished"
    return (max(values) if case.statistic == "max" else statistics.median(values)), ""


def main() -> int:
    shared = shared_dir()
    if shared is None:
        print("skipped: ../shared (or $TTFTSIM_SHARED) not found")
        return 0
    with open(shared / "validation" / "published_ttft.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    simulated, skipped, errors = [], [], []
    for number, row in enumerate(rows):
        load = row["request_rate_or_concurrency"]
        label = f"{row['engine']}, {row['model']}, {row['gpu']} TP{row['tp']}, {row['input_len']} / {row['output_len']}"
        case = CASES.get(number)
        if case is None:
            skipped.append(f"| {number} | {label}, {load} | {_why_not(row)} |")
            continue
        measured = float(row["ttft_p50_ms"] or row["ttft_mean_ms"])
        predicted, why = _run(case, number)
        if predicted is None:
            simulated.append(f"| {number} | {label}, {load} | {measured:,.1f} | - | - | {why} |")
            continue
        error = (predicted - measured) / measured
        errors.append(abs(error))
        simulated.append(
            f"| {number} | {label}, {load} | {measured:,.1f} | {predicted:,.1f} | {error:+.1%} | {case.assumed} |"
        )
        print(simulated[-1], flush=True)
    median = f"{statistics.median(errors):.1%}" if errors else "-"
    lines = [
        "# Predictions against published single TTFT numbers",
        "",
        "Generated by `python benchmarks/published_check.py` from `../shared/validation/published_ttft.csv` (32 rows",
        "from vendor pages, blogs and benchmark READMEs; lower trust: versions and workloads often underspecified).",
        "Each simulated row runs as a user would write it (`ttftsim simulate`, kernel costs `auto`, engine arguments",
        "the row does not name at the assumed release's defaults); predicted is the simulated median TTFT (the rows",
        "give a P50, or a mean of requests sent one at a time; the batch row: the last of its 16 first tokens).",
        "Nothing is fitted to these rows.",
        "",
        f"Simulated: {len(errors)} rows, median absolute error {median}.",
        "",
        "| row | deployment, load | measured ms | predicted ms | error | assumed |",
        "|---|---|---|---|---|---|",
        *simulated,
        "",
        "Not simulated:",
        "",
        "| row | deployment, load | why |",
        "|---|---|---|",
        *skipped,
        "",
    ]
    OUT.write_text("\n".join(lines), encoding="utf-8")
    print(f"simulated {len(errors)} rows, median |error| {median}; wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
