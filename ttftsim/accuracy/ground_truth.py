"""Readers for measured ground truth, turned into scenarios to simulate and numbers to compare.

Formats (../shared/validation/README.md):
- open-loop runs (JSON list): vLLM engine arguments, an inference-perf `shared_prefix` workload with
  `constant` stages, and per stage the client-side latency percentiles of the successful requests. The
  README reads `constant` as one send every 1/rate; the tool's own timer (inference-perf fc877d3, the
  version of the runs, loadgen/load_timer.py ConstantLoadTimer) draws int(rate x duration) exponential gaps
  scaled to the stage's duration, so the sends are simulated that way (workload/arrivals.py);
- closed-loop points (CSV): fixed concurrency, fixed input/output lengths, mean TTFT and TPOT.
TPOT compared is (end-to-end - TTFT) / (output tokens - 1): inference-perf's own TPOT divides by its
re-tokenised count of the streamed text, about twice the generated tokens for random-token prompts.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from ttftsim.accuracy.names import resolve_hardware, resolve_model
from ttftsim.config.loading import validation_error
from ttftsim.config.scenario import DatasetSampling, KernelCosts, Scenario
from ttftsim.errors import InputError
from ttftsim.inputs.files import excerpt, read_text
from ttftsim.inputs.structured import parse_json
from ttftsim.metrics.intervals import reported_levels

CLIENT_TIMEOUT_S = 300.0  # inference-perf's request timeout in these runs


@dataclass(frozen=True)
class ClosedLoopHarness:
    """How AIConfigurator's benchmark ran aiperf for a closed-loop point, per client (c clients)."""

    warmup_per_client: int
    measured_per_client: int
    entries_per_client: int | None  # --num-dataset-entries / c; None: aiperf's default (100 entries)
    sampling: DatasetSampling | None  # how the aiperf of the day drew from the dataset; None: its default

    def warmup(self, concurrency: int) -> int:
        """Warm-up requests of c = concurrency clients."""
        return self.warmup_per_client * concurrency

    def client(self, concurrency: int) -> dict[str, object]:
        """The scenario's `client` for c = concurrency clients."""
        client: dict[str, object] = {"tool": "aiperf", "warmup_requests": self.warmup(concurrency)}
        if self.entries_per_client is not None:
            client["dataset_entries"] = self.entries_per_client * concurrency
        if self.sampling is not None:
            client["dataset_sampling"] = self.sampling
        return client


# The closed-loop points (AIConfigurator's systems/silicon_sample.csv format) do not record their harness. A row
# without backend_version was measured in October-December 2025 (the shared points: 2025-10-29, each row's
# silicon_data_source); the aiperf command AIConfigurator itself ran that month is its eval pipeline's: from
# 2025-10-14 (commit 4361371, "add aiperf for eval") src/aiconfigurator/eval/benchmarks/genai_perf_runner.py runs
# `aiperf profile --endpoint-type chat --streaming --synthetic-input-tokens-mean I --output-tokens-mean O (stddev
# 0) --extra-inputs max_tokens:O min_tokens:O ignore_eos:true --concurrency c --request-count 10c
# --warmup-request-count 2c --num-dataset-entries 12c` (the pipeline then launched TensorRT-LLM services; its vLLM
# generator was still empty). aiperf of that month (0.1) drew each request's prompt from the 12c entries
# uniformly with replacement (workload/clients.py): about 4 in 10 measured requests repeat a prompt that vLLM's
# prefix cache may still hold. The measured points rule out the 100-prompt default of the later bench_run
# template: at c=64 (1,024 tokens, TP4) 0.26 s was measured, where prompts served from cache give 0.05 s.
EVAL_HARNESS_2025 = ClosedLoopHarness(
    warmup_per_client=2, measured_per_client=10, entries_per_client=12, sampling="random"
)
# A row naming its vLLM release was measured in 2026 (releases 0.12-0.19), when the generator's bench_run.sh.j2
# (generator/config/backend_templates/benchmark/, from 2026-02-11) runs `aiperf profile --concurrency c
# --num-requests 20c --warmup-request-count 2c --extra-inputs ignore_eos:true` with aiperf's default dataset.
BENCH_RUN_2026 = ClosedLoopHarness(warmup_per_client=2, measured_per_client=20, entries_per_client=None, sampling=None)
# A row without backend_version: every such vLLM row of silicon_sample.csv was measured between 2025-10-29 and
# 2025-12-05 (its silicon_data_source field), when the releases were 0.11-0.12: one batch in flight, async
# scheduling opt-in (config/engine_versions.yaml). The shared closed-loop points are such rows (2025-10-29).
UNVERSIONED_VLLM = "0.11"
# A measured stage whose client timed one first token in twenty (or more) with the request's last is its
# client's as much as the server's (StageTruth.is_client_bound): at that share the late reads can hold the P95
# and up. Not guarded: fewer late reads can still hold a stage's P99 (one in a hundred), which stays scored.
CLIENT_BOUND_SHARE = 0.05
# What the open-loop runs had that is not simulated, and what that changes (docs/engine-semantics.md 7).
OPEN_LOOP_NOTES = (
    "the open-loop runs had an 8 GiB CPU KV-offload connector (../shared/validation/README.md), simulated as "
    "engine.kv_offloading_size 8 (docs/engine-semantics.md 12): their 100 prompts stay in the GPU cache, so the "
    "tier is never read; the copies that store blocks to it run on their own stream and are not charged",
    "their `constant` stages are sent as inference-perf's timer sends them (int(rate x duration) exponential gaps "
    "scaled to the stage, loadgen/load_timer.py at fc877d3), not one every 1/rate as the validation README says",
)


@dataclass(frozen=True)
class StageTruth:
    """One measured load level: requests arriving in [start_s, end_s), and what the client measured (s)."""

    label: str
    start_s: float
    end_s: float
    measured: dict[str, float]
    num_failed: int = 0
    ttft_levels_s: dict[float, float] = field(default_factory=dict)  # reported TTFT percentiles: level -> s
    num_succeeded: int = 0  # requests behind the reported percentiles (0: unknown)
    ttft_values_s: tuple[float, ...] = ()  # each successful request's TTFT, where the report lists them
    # Requests of two or more output tokens whose first token the client timed with their last (reports with
    # per-request values; 0 where unknown): the server streams each token as a step makes it (the first from
    # the prefill, the rest from later decode steps), so these are a client that did not read its stream
    # until it had ended (or an API server a whole decode behind, which merges what a stream has not taken);
    # their TTFTs are not the engine's (accuracy/reports/measured.py, docs/engine-semantics.md 4).
    late_first_tokens: int = 0
    multi_token_requests: int = 0  # the requests of two or more output tokens that late_first_tokens is out of

    @property
    def is_client_bound(self) -> bool:
        """Whether the client timed at least CLIENT_BOUND_SHARE of its first tokens with the last: its TTFTs
        are not only the engine's (left out of the error medians, with a note)."""
        return self.late_first_tokens > 0 and self.late_first_tokens >= CLIENT_BOUND_SHARE * self.multi_token_requests


@dataclass(frozen=True)
class Case:
    """A run to simulate and the stages to compare. warmup_requests are left out of closed-loop means."""

    name: str
    scenario: Scenario
    stages: list[StageTruth] = field(default_factory=list)
    closed_loop: bool = False
    warmup_requests: int = 0
    skip_reason: str | None = None  # a model, system or precision that maps to no preset / profile / dtype
    notes: tuple[str, ...] = ()  # what the measurement had that the simulation leaves out
    server_side: bool = False  # the measured TTFT and e2e are vLLM's own (its /metrics histograms), not a client's


def _model_name(hf_id: str) -> str:
    return hf_id.rsplit("/", 1)[-1]


def _open_loop_case(run: dict[str, Any], source: str) -> Case:
    engine, workload = run["engine"], run["workload"]
    prefix, arrivals = workload["shared_prefix"], workload["arrivals"]
    stages = [{"rate": s["rate"], "duration_s": s["duration"]} for s in arrivals["stages"]]
    model, hardware = resolve_model(engine["model"]), resolve_hardware(engine["hardware"])
    scenario = Scenario.model_validate(
        {
            "name": run["run"],
            "model": model.model,
            "hardware": hardware.name,
            "engine": {
                "vllm_version": engine["version"],
                "tensor_parallel_size": engine["tensor_parallelism"],
                "max_model_len": engine["max_model_len"],
                "max_num_batched_tokens": engine["max_num_batched_tokens"],
                "max_num_seqs": engine["max_num_seqs"],
                "quantization": model.quantization,
                "kv_offloading_size": 8,
            },
            "workload": {
                "type": "shared_prefix",
                "arrivals": {
                    "type": "stages",
                    # the tool's load timers (workload/arrivals.py scaled_exponential): not evenly spaced
                    "process": "inference-perf-poisson" if arrivals["type"] == "poisson" else "inference-perf-constant",
                    "stages": stages,
                },
                "num_groups": prefix["num_groups"],
                "num_prompts_per_group": prefix["num_prompts_per_group"],
                "system_prompt_len": prefix["system_prompt_len"],
                "question_len": prefix["question_len"],
                "output_len": prefix["output_len"],
            },
            "client_timeout_s": CLIENT_TIMEOUT_S,
            "client": {"tool": "inference-perf"},
        }
    )
    truths, start = [], 0.0
    output = prefix["output_len"]
    for stage in run["stages"]:
        latency = stage["latency_s"]
        ttft, e2e = latency["time_to_first_token"], latency["request_latency"]
        measured = {
            "ttft_mean": ttft["mean"],
            "ttft_p50": ttft["median"],
            "ttft_p90": ttft["p90"],
            "ttft_p99": ttft["p99"],
            "tpot_p50": (e2e["median"] - ttft["median"]) / (output - 1),
            "e2e_p50": e2e["median"],
        }
        end = start + stage["duration_s"]
        failed = stage.get("n_fail", 0)
        succeeded = stage.get("n_success", round(stage["rate_rps"] * stage["duration_s"]) - failed)
        levels = reported_levels(ttft)
        truths.append(StageTruth(f"{stage['rate_rps']} req/s", start, end, measured, failed, levels, succeeded))
        start = end
    return Case(run["run"], scenario, truths, notes=OPEN_LOOP_NOTES, skip_reason=model.problem or hardware.problem)


def _engine_version(row: pd.Series) -> str:
    """The row's vLLM release as major.minor (0.12.0 -> 0.12); UNVERSIONED_VLLM when it gives none or a nightly."""
    found = re.match(r"(\d+)\.(\d+)", str(row.get("backend_version", "")))
    return f"{found.group(1)}.{found.group(2)}" if found else UNVERSIONED_VLLM


def _harness(row: pd.Series) -> ClosedLoopHarness:
    """The 2025 eval harness for a row that names no vLLM build, bench_run for one that names a release or a
    nightly (measured in 2026)."""
    named = row.get("backend_version")
    return EVAL_HARNESS_2025 if pd.isna(named) or not str(named).strip() else BENCH_RUN_2026


def _closed_loop_case(row: pd.Series) -> Case:
    concurrency, isl, osl = int(row["concurrency"]), int(row["isl"]), int(row["osl"])
    harness = _harness(row)
    warmup = harness.warmup(concurrency)
    precision = None if pd.isna(row["precision"]) else str(row["precision"])
    model, hardware = resolve_model(str(row["model_path"]), precision), resolve_hardware(str(row["system"]))
    scenario = Scenario.model_validate(
        {
            "name": f"{_model_name(row['model_path'])} {row['precision']} tp{int(row['tp_size'])} "
            f"isl{isl} osl{osl} c{concurrency}",
            "model": model.model,
            "hardware": hardware.name,
            "engine": {
                "vllm_version": _engine_version(row),
                "tensor_parallel_size": int(row["tp_size"]),
                "quantization": model.quantization,
                "max_model_len": isl + osl + 16,
            },
            "workload": {
                "type": "synthetic",
                "arrivals": {"type": "closed_loop", "clients": concurrency},
                "prompt_tokens": {"type": "fixed", "value": isl},
                "output_tokens": {"type": "fixed", "value": osl},
                "num_requests": warmup + harness.measured_per_client * concurrency,
            },
            "client": harness.client(concurrency),
        }
    )
    measured = {"ttft_mean": float(row["silicon_ttft_ms"]) / 1e3, "tpot_mean": float(row["silicon_tpot_ms"]) / 1e3}
    return Case(
        scenario.name,
        scenario,
        [StageTruth(f"c={concurrency}", 0.0, float("inf"), measured)],
        closed_loop=True,
        warmup_requests=warmup,
        skip_reason=model.problem or hardware.problem,
    )


def read_ground_truth(path: Path) -> list[Case]:
    """Cases from an open-loop JSON or a closed-loop CSV file (read through ttftsim/inputs); a run or row of
    the wrong shape is one error naming the file, the run or line, and the field."""
    source = str(path)
    text = read_text(path, what="ground truth")
    if path.suffix == ".json":
        runs = parse_json(text, source)
        if not isinstance(runs, list) or not runs:
            raise InputError(source, "", "expected a JSON list of runs" + (", got an empty one" if runs == [] else ""))
        return [_case(partial(_open_loop_case, run, source), source, f"run {i}") for i, run in enumerate(runs)]
    try:
        frame = pd.read_csv(io.StringIO(text))
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as exc:
        raise InputError(source, "", f"cannot parse ground truth ({str(exc).strip()[:160]})") from None
    if frame.empty:
        raise InputError(source, "", "no closed-loop points: a header without rows")
    return [
        _case(partial(_closed_loop_case, row), source, f"line {i + 2}") for i, (_, row) in enumerate(frame.iterrows())
    ]


def _case(build: Callable[[], Case], source: str, where: str) -> Case:
    """One case built from a run or row, its shape errors turned into one line naming the field."""
    try:
        return build()
    except ValidationError as exc:
        error = validation_error(source, exc, Scenario)
        raise InputError(source, f"{where} (as scenario {error.field})", error.message) from None
    except KeyError as exc:
        raise InputError(source, f"{where} {excerpt(exc.args[0], 30)}", "field missing from ground truth") from None
    except (TypeError, AttributeError, ValueError, ZeroDivisionError, IndexError) as exc:
        raise InputError(source, where, f"malformed ground truth ({excerpt(str(exc), 120)})") from None


def with_kernel_costs(cases: list[Case], kernel_costs: KernelCosts) -> list[Case]:
    """The same cases simulated with the roofline or the calibrated kernel curves."""
    update = {"kernel_costs": kernel_costs}
    return [replace(case, scenario=case.scenario.model_copy(update=update)) for case in cases]


def client_bound_note(stages: Sequence[StageTruth], consequence: str = "shown, not in the error medians") -> str:
    """Why stages are client-bound, in words with their counts, and what that does (`consequence`)."""
    late = sum(stage.late_first_tokens for stage in stages)
    multi = sum(stage.multi_token_requests for stage in stages)
    return (
        f"client-bound: the client timed {late} of {multi} first tokens with the request's last (it did not read "
        "its streams as they came, or the API server fell a whole decode behind: not the engine's TTFTs; "
        f"{consequence})"
    )


def case_notes(cases: list[Case], kernel_costs: KernelCosts = "auto") -> list[str]:
    """Each distinct note of the cases, once, in order; each run with client-bound stages; and the runs that a
    --kernel-costs choice leaves unchanged (a measured step cost replaces the kernel costs)."""
    notes = list(dict.fromkeys(note for case in cases for note in case.notes))
    for case in cases:
        if bound := [stage for stage in case.stages if stage.is_client_bound]:
            where = case.name if len(case.stages) == 1 else f"{case.name} ({', '.join(s.label for s in bound)})"
            notes.append(f"{where}: {client_bound_note(bound)}")
    measured = [case.name for case in cases if case.scenario.measured_step_cost is not None]
    if kernel_costs != "auto" and measured:
        notes.append(
            f"--kernel-costs {kernel_costs} changes nothing on {', '.join(measured)}: the deployment gives "
            "measured_step_cost, which replaces the kernel costs"
        )
    return notes
