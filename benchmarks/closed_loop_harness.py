"""What the H100 closed-loop points say about the harness that measured them (docs/accuracy.md).

The rows of closed_loop_vllm_h100.csv do not record their harness. ttftsim runs them with the aiperf command
AIConfigurator ran in the month they were measured (ttftsim/accuracy/ground_truth.py, EVAL_HARNESS_2025):
every request asks for exactly O output tokens (min_tokens = max_tokens = O, ignore_eos) and prompts are drawn
with replacement from 12c entries. Two checks of that assumption, none fitted to a TTFT:

1. The real vLLM server on this machine, driven by real aiperf with fixed lengths (serve_runs/closed-fixed-*):
   requests that start decoding in the same step finish in the same step, their clients send again together,
   and every round queues behind its own prefills (a convoy). Measured: how far apart a round's c sends lie,
   against how long a round lasts.
2. Variants: the same points with the prompts unique (one per request) and/or the output lengths not in
   lockstep (uniform between (1 - s) O and O). s is not fitted: the table shows it at 10, 20 and 50%.

`python benchmarks/closed_loop_harness.py` prints both; accuracy_report.py writes them into
docs/accuracy.md.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ttftsim.accuracy.ground_truth import Case, read_ground_truth
from ttftsim.accuracy.harness import StageResult, run_all, summarize
from ttftsim.shared_data import shared_dir

SERVE_RUNS = Path(__file__).resolve().parent / "vllm_cpu" / "serve_runs"
FIXED_LENGTH_AIPERF = ("closed-fixed-c4-aiperf", "closed-fixed-c8-aiperf")
SPREADS = (0.1, 0.2, 0.5)  # shown side by side: the conclusion must not hang on one of them


def variant(case: Case, spread: float, unique_prompts: bool) -> Case:
    """The case with output lengths uniform in [(1 - spread) O, O] (spread 0: fixed) and, if unique_prompts,
    one prompt per request instead of the assumed harness's draws with replacement; everything else (the
    aiperf client, its warm-up barrier, the request counts) as assumed."""
    data = case.scenario.model_dump(exclude_none=True)
    osl = int(data["workload"]["output_tokens"]["value"])
    if spread:
        data["workload"]["output_tokens"] = {"type": "uniform", "low": round((1.0 - spread) * osl), "high": osl}
    if unique_prompts:
        data["client"]["dataset_entries"] = "unique"
        data["client"].pop("dataset_sampling", None)
    return replace(case, scenario=type(case.scenario).model_validate(data))


def serve_convoys(runs: Path = SERVE_RUNS) -> list[dict[str, Any]]:
    """Per fixed-length aiperf run on the real server: the median gap between a measured send and the send
    nearest to it, against the gap if the same sends were spread evenly over the phase."""
    rows = []
    for workload in FIXED_LENGTH_AIPERF:
        for path in sorted((runs / workload).glob("run*.json"), key=lambda p: int(p.stem.removeprefix("run"))):
            run = json.loads(path.read_text())
            sends = np.sort([r["send_s"] for r in run["requests"] if r.get("phase") == "profiling"])
            if len(sends) < 3:
                continue
            gaps = np.diff(sends)
            nearest = np.minimum(np.r_[np.inf, gaps], np.r_[gaps, np.inf])
            rows.append(
                {
                    "run": f"{workload}/{path.stem}",
                    "clients": int(run["params"]["closed_loop_concurrency"]),
                    "sends": len(sends),
                    "nearest_ms": 1e3 * float(np.median(nearest)),
                    "even_ms": 1e3 * float((sends[-1] - sends[0]) / (len(sends) - 1)),
                }
            )
    return rows


def analysis(cases: list[Case], assumed: list[StageResult] | None = None) -> dict[str, Any]:
    """The two checks (module docstring) on the closed-loop cases; `assumed`: their results as run already."""
    variants = {(0.0, False): assumed if assumed is not None else run_all(cases)[0]}
    for spread in (0.0, *SPREADS):
        for unique in (False, True):
            if (spread, unique) not in variants:
                variants[(spread, unique)], _ = run_all([variant(c, spread, unique) for c in cases])
    table = []
    for (spread, unique), results in variants.items():
        metrics = summarize(results)["metrics"]
        table.append(
            {
                "output_spread": spread,
                "unique_prompts": unique,
                "ttft_median_ape": metrics["ttft_mean"]["median_ape"],
                "ttft_p90_ape": metrics["ttft_mean"]["p90_ape"],
                "tpot_median_ape": metrics["tpot_mean"]["median_ape"],
            }
        )
    return {"serve_convoys": serve_convoys(), "variants": table}


def lines(result: dict[str, Any]) -> list[str]:
    """The analysis as markdown for docs/accuracy.md."""
    convoys = result["serve_convoys"]
    out = [
        "**What the points say about their harness.** The assumed harness asks for exactly O output tokens.",
        "Identical requests that start decoding in the same step then finish in the same step, their clients",
        "send again together, and each round queues behind its own prefills. The real server here does exactly",
        "that under real aiperf with fixed lengths (`serve_runs/closed-fixed-*`, 2 warm-up and 20 measured",
        "requests per client): a measured send lies a fraction of a millisecond from another (runs 6-10; up to 25",
        "ms in the earlier runs, whose processes shared both cores), where sends spread evenly over the phase would",
        "lie tens of milliseconds apart:",
        "",
        "| run | clients | measured sends | median gap to the nearest send | evenly spread |",
        "|---|---|---|---|---|",
        *[
            f"| {r['run']} | {r['clients']} | {r['sends']} | {r['nearest_ms']:.2f} ms | {r['even_ms']:.1f} ms |"
            for r in convoys
        ],
        "",
        "The H100 points do not look like that: their mean TTFT at 16-64 clients is about what one queued first",
        "round adds to rounds whose requests rarely meet (the Limits below work one through). The same points",
        "simulated with the prompts unique and/or the output lengths spread (uniform between (1 - s) O and O; s",
        "is not fitted, three values shown), everything else as assumed:",
        "",
        "| output lengths | prompts | TTFT mean median APE | P90 APE | TPOT mean median APE |",
        "|---|---|---|---|---|",
    ]
    for v in result["variants"]:
        lengths = "fixed (assumed)" if not v["output_spread"] else f"spread {v['output_spread']:.0%}"
        prompts = "one per request" if v["unique_prompts"] else "12c entries, with replacement (assumed)"
        out.append(
            f"| {lengths} | {prompts} | {v['ttft_median_ape']:.1%} | {v['ttft_p90_ape']:.1%} | "
            f"{v['tpot_median_ape']:.1%} |"
        )
    return [
        *out,
        "",
        "Any spread of 10% or more with one prompt per request brings the TTFT error under the 15% bar, and the",
        "result hardly moves between 10 and 50%; with fixed lengths no choice of prompts does. The P90 comes from",
        "the 8,192-token prompts, still over-predicted 1.2-1.9x (TP2 at 32 clients the most; at 4 clients TP8",
        "1.3x with a 50% spread): less queueing was measured there than even desynchronised rounds give. So the",
        "points were",
        "most likely measured with output lengths that differ between requests (ignore_eos off, or lengths drawn",
        "per request) and without repeated prompts, not with the command assumed. Which harness it was is not",
        "recorded, so the headline figure above stays the assumed harness's; these variants are evidence about",
        "the data, not a prediction ttftsim makes by default.",
        "",
    ]


def main() -> int:
    shared = shared_dir()
    if shared is None:
        print("skipped: ../shared absent")
        return 0
    result = analysis(read_ground_truth(shared / "validation/closed_loop_vllm_h100.csv"))
    print("\n".join(lines(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
