"""What the H100 closed-loop points say about the harness that measured them (docs/accuracy.md).

The rows of closed_loop_vllm_h100.csv do not record their harness. ttftsim runs them with the aiperf command
AIConfigurator ran in the month they were measured (ttftsim/accuracy/ground_truth.py, EVAL_HARNESS_2025):
every request asks for exactly O output tokens (min_tokens = max_tokens = O, ignore_eos) and prompts are drawn
with replacement from 12c entries. Two checks of that assumption, none fitted to a TTFT:

1. The real vLLM server on this machine with the same closed loop twice (serve_bench.py closed-fixed-c8 and
   closed-spread-c8, vllm bench with 8 clients, 256-token prompts): 32 output tokens each, then 16-48.
   Requests that start decoding in the same step finish in the same step, their clients send again
   together and every round queues behind its own prefills (a convoy); spread lengths lower the median
   TTFT, and ttftsim predicts both runs (compare_serve.py, serve_compare-device-core-run11.json). aiperf
   cannot show this here: its processes hand their responses back together, so its spread run queues as
   much as its fixed one (a request's decode time does not follow its output length).
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
from ttftsim.workload.clients import behaviour

SERVE_RUNS = Path(__file__).resolve().parent / "vllm_cpu" / "serve_runs"
SERVE_PAIR = Path(__file__).resolve().parent / "vllm_cpu" / "serve_compare-device-core-run11.json"
SERVE_TAG = "run11"
SERVE_AGAIN = SERVE_PAIR.with_name("serve_compare-device-core-run12.json")  # vllm bench's pair measured again
PAIR = (
    "closed-fixed-c8-vllmbench",
    "closed-spread-c8-vllmbench",
    "closed-fixed-c8-aiperf",
    "closed-spread-c8-aiperf",
)
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


def ideal_client(case: Case) -> Case:
    """The closed-loop case with clients spread over one request's duration (~15 ms per output token), the
    tool's prompts kept (its dataset and how it draws from it)."""
    data = case.scenario.model_dump()
    spread = 0.015 * data["workload"]["output_tokens"]["value"]
    data["workload"]["arrivals"]["ramp_up_s"] = spread
    tool = behaviour(case.scenario.client)
    data["client"] = {
        "tool": "ideal",
        "dataset_entries": tool.dataset_entries or "unique",
        "dataset_sampling": tool.sampling,
    }
    return replace(case, scenario=type(case.scenario).model_validate(data))


def serve_pair(compare: Path = SERVE_PAIR, again: Path = SERVE_AGAIN, runs: Path = SERVE_RUNS) -> dict[str, Any]:
    """The fixed and spread closed loops on the real server: measured (and, where `again` has them, measured
    again) and predicted TTFT P50/P90/P99 (s), and per run how strongly a request's decode time follows its
    output length (Pearson r)."""
    rows = {row["workload"]: row for row in json.loads(compare.read_text())["rows"]}
    repeat = {row["workload"]: row for row in json.loads(again.read_text())["rows"]} if again.exists() else {}
    out: dict[str, Any] = {}
    for name in PAIR:
        run = json.loads((runs / name / f"{SERVE_TAG}.json").read_text())
        done = [
            r
            for r in run["requests"]
            if r.get("phase", "profiling") == "profiling"
            and r.get("ttft_s") is not None
            and r.get("latency_s") is not None
            and r.get("output_tokens") is not None
        ]
        lengths = np.array([r["output_tokens"] for r in done], dtype=float)
        decode = np.array([r["latency_s"] - r["ttft_s"] for r in done])
        follows = float(np.corrcoef(lengths, decode)[0, 1]) if lengths.std() > 0 else None
        out[name] = {
            "measured": rows[name]["measured"],
            "again": repeat[name]["measured"] if name in repeat else None,
            "predicted": rows[name]["with API server"],
            "decode_follows_length": follows,
        }
    return out


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
        long_prompts = [
            r.predicted["ttft_mean"] / r.measured["ttft_mean"]
            for r in results
            if " isl8192 " in r.case and not r.measured_overloaded
        ]
        table.append(
            {
                "output_spread": spread,
                "unique_prompts": unique,
                "ttft_median_ape": metrics["ttft_mean"]["median_ape"],
                "ttft_p90_ape": metrics["ttft_mean"]["p90_ape"],
                "tpot_median_ape": metrics["tpot_mean"]["median_ape"],
                "long_prompt_ratio": (min(long_prompts), max(long_prompts)),
            }
        )
    return {"serve_pair": serve_pair(), "variants": table}


def spread_ranges(result: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Over the variants with spread lengths and one prompt per request: the range of each error, and of the
    8,192-token prompts' predicted / measured ratio."""
    chosen = [v for v in result["variants"] if v["output_spread"] and v["unique_prompts"]]
    ranges = {k: (min(v[k] for v in chosen), max(v[k] for v in chosen)) for k in ("ttft_median_ape", "tpot_median_ape")}
    ranges["long_prompt_ratio"] = (
        min(v["long_prompt_ratio"][0] for v in chosen),
        max(v["long_prompt_ratio"][1] for v in chosen),
    )
    return ranges


def lines(result: dict[str, Any]) -> list[str]:
    """The analysis as markdown for docs/accuracy.md."""
    pair = result["serve_pair"]

    def ms(values: list[float]) -> str:
        return " / ".join(f"{1e3 * v:.0f}" for v in values)

    fixed, spread = pair["closed-fixed-c8-vllmbench"], pair["closed-spread-c8-vllmbench"]
    aiperf_fixed, aiperf_spread = (
        pair[name]["measured"][0] / pair[name]["predicted"][0]
        for name in ("closed-fixed-c8-aiperf", "closed-spread-c8-aiperf")
    )
    low, high = spread_ranges(result)["long_prompt_ratio"]
    out = [
        "**What the points say about their harness.** The assumed harness asks for exactly O output tokens.",
        "Identical requests that start decoding in the same step then finish in the same step, their clients",
        "send again together, and each round queues behind its own prefills. On the real server here (run",
        "`run11`, vllm bench with 8 clients, every prompt 256 tokens: `serve_bench.py --tag run11 --only",
        "closed-fixed-c8,closed-spread-c8`; aiperf the same: `aiperf_closed.py --tag run11 --concurrency 8",
        "[--output-stddev 8]`), the same closed loop with 32 output tokens each and with 16-48 (aiperf: a normal",
        "around 32, standard deviation 8), and ttftsim's prediction of each (`TTFTSIM_SERVE_LAYOUT=device-core",
        "compare_serve.py --tag run11 --against '' --remeasure --api-costs",
        "benchmarks/vllm_cpu/api_server_costs-device-core-run11.json`: this machine's own microbenchmark and",
        "API-server costs, `serve_compare-device-core-run11.json`; nothing fitted; predicted again with the same",
        "costs by `--step-cost-from` the earlier output, no vLLM needed):",
        "",
        "| run | measured TTFT P50 / P90 / P99 ms | measured again (run12) | predicted | decode time follows output"
        " length (r) |",
        "|---|---|---|---|---|",
        *[
            f"| {name} | {ms(row['measured'])} | {ms(row['again']) if row['again'] else '-'} | "
            f"{ms(row['predicted'])} | "
            + ("-" if row["decode_follows_length"] is None else f"{row['decode_follows_length']:.2f}")
            + " |"
            for name, row in pair.items()
        ],
        "",
        f"Spread lengths lower the median TTFT, measured ({ms(fixed['measured'][:1])} -> "
        f"{ms(spread['measured'][:1])} ms)",
        f"and predicted ({ms(fixed['predicted'][:1])} -> {ms(spread['predicted'][:1])} ms) alike; the P90 and P99",
        "move about as much between two runs of the same workload (run12, `serve_bench.py --tag run12`, the same",
        "costs: `serve_compare-device-core-run12.json`), where the median's drop repeats. The fixed run itself",
        f"is over-predicted {fixed['predicted'][0] / fixed['measured'][0]:.1f}x at the median: the simulated groups",
        "re-form exactly every round, while the measured ones break up and form again (in run11 a whole round of",
        "eight ended within 1 ms, and the next round's TTFTs spread from 40 to 141 ms). aiperf",
        "shows nothing of the kind here: its processes hand their responses back together (a request's decode",
        "time does not follow its length, r above), so its spread run queues as much as its fixed one, and",
        f"ttftsim, which models the engine, misses its median by {aiperf_fixed:.1f}x (fixed) and {aiperf_spread:.1f}x"
        " (spread).",
        "",
        "The H100 points do not look like a convoy: their mean TTFT at 16-64 clients is about what one queued first",
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
        f"the 8,192-token prompts, predicted at {low:.2f}-{high:.2f}x their measured means under these variants: less",
        "queueing was measured there than even desynchronised rounds give, or their prefill is slower simulated",
        "than it ran. So the points were most likely measured with output lengths that differ between requests",
        "(ignore_eos off, or lengths drawn per request) and without repeated prompts, not with the command",
        "assumed. Which harness it was is not recorded, so the headline figure above stays the assumed",
        "harness's; these variants are evidence about",
        "the data, not a prediction ttftsim makes by default.",
        "",
        "How the assumed command could still give spread lengths (read in the sources; not shown by the rows):",
        "AIConfigurator's evaluation pipeline of that month (src/aiconfigurator/eval at faa9940e, 2025-10-21)",
        "passes `max_tokens`, `min_tokens` and `ignore_eos` at the top level of the request",
        "(eval/benchmarks/genai_perf_runner.py) to services behind Dynamo's OpenAI frontend: eval/service.py",
        "waits for a /health answer in JSON with status `healthy` and an `endpoints` list, which Dynamo's",
        "frontend gives and `vllm serve` (an empty 200) does not; the run scripts it generated then (TensorRT-LLM",
        "only) start `dynamo.frontend`. Dynamo's frontend took `ignore_eos` only from its `nvext` extension and",
        "`min_tokens` from neither (ai-dynamo/dynamo pull request 988, 2025-05; issue 1705, 2025-06: a top-level",
        'ignore_eos "still stops outputting tokens early"), and AIConfigurator\'s benchmark template of 2026-02',
        '(bench_run.sh.j2) sends `{"nvext":{"ignore_eos":true}}` beside it. Through that frontend every request',
        "ends at the model's end of sequence or at O, whichever comes first. The rows do not say whether the",
        "vLLM points went through it. The public points of the same sweep (below, `silicon_sample_check.py",
        "--variants`) test the variants on data they were not read from.",
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
