"""Readers for measured ground truth, turned into scenarios to simulate and numbers to compare.

Formats (../shared/validation/README.md):
- open-loop runs (JSON list): vLLM engine arguments, an inference-perf `shared_prefix` workload with
  constant-rate stages, and per stage the client-side latency percentiles of the successful requests;
- closed-loop points (CSV): fixed concurrency, fixed input/output lengths, mean TTFT and TPOT.
TPOT compared is (end-to-end - TTFT) / (output tokens - 1): inference-perf's own TPOT divides by its
re-tokenised count of the streamed text, about twice the generated tokens for random-token prompts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from ttftsim.config.scenario import KernelCosts, Scenario
from ttftsim.errors import InputError

CLIENT_TIMEOUT_S = 300.0
# The load generator's view of the first token. inference-perf with random-token prompts sees content only
# with the 2nd generated token (the first detokenises to an empty delta; its ITLs show tokens in pairs).
# Fitted on the `codegen` runs of h100_vllm_runs.json (benchmarks/fit_frontend.py), checked on the rest.
FIRST_VISIBLE_TOKEN = {"inference-perf": 2}
# Closed-loop clients desynchronise in real benchmarks; starting them spread over about one request's
# duration (osl tokens at ~15 ms) gives the steady state its random phases. Not fitted to the TTFTs.
RAMP_S_PER_TOKEN = 0.015  # inference-perf's default request timeout in these runs


@dataclass(frozen=True)
class StageTruth:
    """One measured load level: requests arriving in [start_s, end_s), and what the client measured (s)."""

    label: str
    start_s: float
    end_s: float
    measured: dict[str, float]
    num_failed: int = 0


@dataclass(frozen=True)
class Case:
    """A run to simulate and the stages to compare. warmup_requests are left out of closed-loop means."""

    name: str
    scenario: Scenario
    stages: list[StageTruth] = field(default_factory=list)
    closed_loop: bool = False
    warmup_requests: int = 0


def _model_name(hf_id: str) -> str:
    return hf_id.rsplit("/", 1)[-1]


def _open_loop_case(run: dict[str, Any], source: str) -> Case:
    engine, workload = run["engine"], run["workload"]
    prefix, arrivals = workload["shared_prefix"], workload["arrivals"]
    stages = [{"rate": s["rate"], "duration_s": s["duration"]} for s in arrivals["stages"]]
    scenario = Scenario.model_validate(
        {
            "name": run["run"],
            "model": _model_name(engine["model"]),
            "hardware": engine["hardware"],
            "engine": {
                "vllm_version": engine["version"],
                "tensor_parallel_size": engine["tensor_parallelism"],
                "max_model_len": engine["max_model_len"],
                "max_num_batched_tokens": engine["max_num_batched_tokens"],
                "max_num_seqs": engine["max_num_seqs"],
            },
            "workload": {
                "type": "shared_prefix",
                "arrivals": {
                    "type": "stages",
                    "process": "poisson" if arrivals["type"] == "poisson" else "constant",
                    "stages": stages,
                },
                "num_groups": prefix["num_groups"],
                "num_prompts_per_group": prefix["num_prompts_per_group"],
                "system_prompt_len": prefix["system_prompt_len"],
                "question_len": prefix["question_len"],
                "output_len": prefix["output_len"],
            },
            "client_timeout_s": CLIENT_TIMEOUT_S,
            "first_visible_token": FIRST_VISIBLE_TOKEN.get(engine.get("app", ""), 1),
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
        truths.append(StageTruth(f"{stage['rate_rps']} req/s", start, end, measured, stage.get("n_fail", 0)))
        start = end
    return Case(run["run"], scenario, truths)


def _closed_loop_case(row: pd.Series) -> Case:
    concurrency, isl, osl = int(row["concurrency"]), int(row["isl"]), int(row["osl"])
    warmup = 2 * concurrency
    scenario = Scenario.model_validate(
        {
            "name": f"{_model_name(row['model_path'])} {row['precision']} tp{int(row['tp_size'])} "
            f"isl{isl} osl{osl} c{concurrency}",
            "model": _model_name(str(row["model_path"])),
            "hardware": "H100-SXM5-80GB" if str(row["system"]).startswith("h100") else str(row["system"]),
            "engine": {
                "vllm_version": "0.15",
                "tensor_parallel_size": int(row["tp_size"]),
                "quantization": "fp8" if row["precision"] == "fp8" else None,
                "max_model_len": isl + osl + 16,
            },
            "workload": {
                "type": "synthetic",
                "arrivals": {"type": "closed_loop", "clients": concurrency, "ramp_up_s": RAMP_S_PER_TOKEN * osl},
                "prompt_tokens": {"type": "fixed", "value": isl},
                "output_tokens": {"type": "fixed", "value": osl},
                "num_requests": warmup + 4 * concurrency,
            },
        }
    )
    measured = {"ttft_mean": float(row["silicon_ttft_ms"]) / 1e3, "tpot_mean": float(row["silicon_tpot_ms"]) / 1e3}
    return Case(
        scenario.name,
        scenario,
        [StageTruth(f"c={concurrency}", 0.0, float("inf"), measured)],
        closed_loop=True,
        warmup_requests=warmup,
    )


def read_ground_truth(path: Path) -> list[Case]:
    """Cases from an open-loop JSON or a closed-loop CSV file; errors name the file and field."""
    source = str(path)
    try:
        if path.suffix == ".json":
            runs = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(runs, list):
                raise InputError(source, "", "expected a JSON list of runs")
            return [_open_loop_case(run, source) for run in runs]
        frame = pd.read_csv(path)
        return [_closed_loop_case(row) for _, row in frame.iterrows()]
    except FileNotFoundError:
        raise InputError(source, "", "file not found") from None
    except KeyError as exc:
        raise InputError(source, str(exc.args[0]), "field missing from ground truth") from None
    except (json.JSONDecodeError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(source, "", f"cannot parse ground truth ({exc})") from None


def with_kernel_costs(cases: list[Case], kernel_costs: KernelCosts) -> list[Case]:
    """The same cases simulated with the roofline or the calibrated kernel curves."""
    update = {"kernel_costs": kernel_costs}
    return [replace(case, scenario=case.scenario.model_copy(update=update)) for case in cases]
