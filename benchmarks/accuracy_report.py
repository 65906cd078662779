"""Write docs/accuracy.md: predicted vs measured TTFT on the ground truth in ../shared/validation.

python benchmarks/accuracy_report.py
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from ttftsim.accuracy.ground_truth import Case, read_ground_truth
from ttftsim.accuracy.harness import StageResult, metrics_by_kernel_costs, run_case, summarize
from ttftsim.shared_data import shared_dir

OUT = Path(__file__).resolve().parents[1] / "docs" / "accuracy.md"
CPU_RESULTS = Path(__file__).resolve().parent / "vllm_cpu" / "results.json"
FIT_SET = "codegen"  # runs whose stages fitted the client profile (benchmarks/fit_frontend.py)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1e3:,.1f}"


def _row(r: StageResult, keys: tuple[str, ...]) -> str:
    cells = [f"{_ms(r.measured.get(k))} / {_ms(r.predicted.get(k))}" for k in keys]
    over = ("yes" if r.measured_overloaded else "no") + " / " + ("yes" if r.predicted_overloaded else "no")
    return f"| {r.case} | {r.stage} | " + " | ".join(cells) + f" | {over} |"


def _summary_lines(results: list[StageResult], title: str) -> list[str]:
    summary = summarize(results)
    lines = [f"**{title}**", "", "| metric | stages | median APE | P90 APE | max APE |", "|---|---|---|---|---|"]
    for metric, s in summary["metrics"].items():
        lines.append(f"| {metric} | {s['stages']} | {s['median_ape']:.1%} | {s['p90_ape']:.1%} | {s['max_ape']:.1%} |")
    lines += [
        "",
        f"Overloaded stages predicted overloaded: {summary['overloaded_predicted_overloaded']} of "
        f"{summary['overloaded_stages']}; stages wrongly predicted overloaded: {summary['false_overload']}.",
    ]
    slo = summary["p99_slo_agreement"]
    if any(v["stages"] for v in slo.values()):
        lines.append(
            "P99 TTFT on the same side as measured of a 200 ms / 500 ms / 1 s / 2 s SLO: "
            + ", ".join(f"{v['agree']}/{v['stages']}" for v in slo.values())
            + "."
        )
    return [*lines, ""]


def _cpu_section() -> list[str]:
    """The real-engine comparison on this machine, from benchmarks/vllm_cpu (results.json)."""
    if not CPU_RESULTS.exists():
        return ["## Real vLLM on this machine's CPU", "", "Not run yet: `bash benchmarks/vllm_cpu/run.sh`.", ""]
    data = json.loads(CPU_RESULTS.read_text())
    cost = data["step_cost"]
    lines = [
        "## Real vLLM 0.32 (CPU build) on this machine (`bash benchmarks/vllm_cpu/run.sh`)",
        "",
        "A random-weight 27 M-parameter Llama (6 layers, width 512) served by the real vLLM V1 engine in-process",
        "(`LLMEngine`, one thread, block 32, 512-token budget, 32 sequences), replaying exactly the requests",
        "ttftsim generates. ttftsim's iteration cost is fitted by non-negative least squares to a microbenchmark",
        "of the same engine's iterations (isolated prefills, decode batches, and prompts joining decode batches),",
        "never to the TTFTs below: fixed "
        f"{cost['fixed_s'] * 1e3:.2f} ms, {cost['per_token_s'] * 1e6:.1f} us per prefill token, "
        f"{cost.get('per_decode_token_s', cost['per_token_s']) * 1e6:.1f} us per decode token, "
        f"{cost['per_kv_token_s'] * 1e9:.1f} ns per KV token read, {cost['per_attn_pair_s'] * 1e9:.2f} ns per "
        "attention pair. KV blocks: the engine's own count.",
        "",
        "Latest run (three replays pooled):",
        "",
        "| workload | requests | measured P50 / P90 / P99 ms | predicted P50 / P90 / P99 ms |",
        "|---|---|---|---|",
    ]
    for row in data["workloads"]:
        m, p = row["measured"], row["predicted"]
        lines.append(
            f"| {row['workload']} | {row['requests']} | "
            f"{m['p50'] * 1e3:.1f} / {m['p90'] * 1e3:.1f} / {m['p99'] * 1e3:.1f} | "
            f"{p['p50'] * 1e3:.1f} / {p['p90'] * 1e3:.1f} / {p['p99'] * 1e3:.1f} |"
        )
    lines += ["", "| TTFT | median APE | max APE |", "|---|---|---|"]
    lines += [f"| {q.upper()} | {s['median_ape']:.1%} | {s['max_ape']:.1%} |" for q, s in data["summary"].items()]
    lines += [
        "",
        "Every run so far (the 12:18 and 12:26 runs replayed each workload once):",
        "",
        "| run | P50 median APE | P90 median APE | P99 median APE |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {run['date']} | "
        + " | ".join(f"{run['summary'][q]['median_ape']:.1%}" for q in ("p50", "p90", "p99"))
        + " |"
        for run in data.get("runs", [])
    ]
    return [
        *lines,
        "",
        "Measured TTFTs of identical requests move 10-25% between runs on this shared VM (poisson-low P50: 82,",
        "89, 101 ms in single replays), so the latest run replays each workload three times (prompts salted per",
        "replay, so no replay hits another's cache), pools them, and times the microbenchmark before and after",
        "the replays. Single-replay runs above straddled the bar; an earlier run, before mixed iterations were",
        "added to the microbenchmark, gave 0.9% / 4.0% / 3.1%. The small-KV preemption workload stays the",
        "outlier and is unstable on the real engine itself (single-replay P50 104, 2,143, 671 ms); vLLM's own",
        "counter showed 13 preemptions in one replay where ttftsim has 14.",
        "",
    ]


def _kernel_cost_lines(sets: dict[str, list[Case]]) -> list[str]:
    """Median / P90 APE of each set simulated with the roofline and with the calibrated kernel curves."""
    lines = [
        "| set | metric | roofline median / P90 APE | calibrated median / P90 APE |",
        "|---|---|---|---|",
    ]
    for name, cases in sets.items():
        summaries = metrics_by_kernel_costs(cases)
        for metric in summaries["roofline"]:
            cells = [f"{m[metric]['median_ape']:.1%} / {m[metric]['p90_ape']:.1%}" for m in summaries.values()]
            lines.append(f"| {name} | {metric} | {cells[0]} | {cells[1]} |")
    return [*lines, ""]


def main() -> int:
    shared = shared_dir()
    if shared is None:
        print("skipped: ../shared absent")
        return 0
    open_cases = read_ground_truth(shared / "validation/h100_vllm_runs.json")
    closed_cases = read_ground_truth(shared / "validation/closed_loop_vllm_h100.csv")
    open_loop = [s for c in open_cases for s in run_case(c)]
    closed = [s for c in closed_cases for s in run_case(c)]
    held = [r for r in open_loop if FIT_SET not in r.case]
    normal_held = sum(not r.measured_overloaded for r in held)
    keys = ("ttft_mean", "ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50")
    lines = [
        "# Accuracy against measured vLLM deployments",
        "",
        "Generated by `python benchmarks/accuracy_report.py` (the same numbers: `ttftsim accuracy FILE`).",
        "",
        "## Method",
        "",
        "Each measured run is simulated with the engine model of its vLLM version on its GPU: the model's",
        "config, the kernel times (the default, `kernel_costs: auto`: curves fitted to AIConfigurator's H100",
        "kernel tables, docs/calibration.md), the run's engine arguments and its workload (inference-perf",
        "`shared_prefix`, the same",
        "prompt-reuse pattern, constant-rate stages back to back, 300 s client timeout). Per stage, predicted",
        "percentiles come from the simulated requests that arrived in the stage and finished.",
        "",
        "Two client-side parameters are fitted, on the stages of the two `codegen` runs only (4 of the 10",
        "stages that did not overload; `python benchmarks/fit_frontend.py`): the API-server/HTTP overhead",
        "added to every TTFT (3.0 ms, now the vLLM 0.15 default) and the token with which inference-perf first",
        "sees content (the 2nd: with random-token prompts the first token often detokenises to an empty delta;",
        "the measured inter-token latencies show tokens arriving in pairs). Nothing else is fitted to TTFTs.",
        "",
        "TPOT is compared as (end-to-end - TTFT) / (output - 1) at the median: inference-perf's own TPOT",
        "divides by its re-tokenised count of the streamed text, about twice the generated tokens here.",
        "",
        "## Calibrated kernels against the roofline",
        "",
        "The same runs with `--kernel-costs roofline` (datasheet peaks, the profile's default efficiencies)",
        "and `--kernel-costs calibrated` (the default where a GPU has a calibration). Nothing in either is",
        "fitted to these runs (the client profile below was fitted once, with the roofline).",
        "",
        *_kernel_cost_lines({"open loop": open_cases, "closed loop": closed_cases}),
        "## Open-loop runs: vLLM 0.15.1 on H100-SXM5-80GB (`h100_vllm_runs.json`)",
        "",
        *_summary_lines(
            held,
            f"Held out from the fit ({len(held)} stages, {normal_held} not overloaded)",
        ),
        *_summary_lines(open_loop, f"All stages ({len(open_loop)})"),
        "measured / predicted, ms:",
        "",
        "| run | stage | TTFT mean | P50 | P90 | P99 | TPOT P50 | overloaded |",
        "|---|---|---|---|---|---|---|---|",
        *[_row(r, keys) for r in open_loop],
        "",
        "## Closed-loop points: Llama-3.1-70B FP8 on H100 (`closed_loop_vllm_h100.csv`)",
        "",
        "Fixed concurrency, fixed lengths; steady-state means after 2 x concurrency warm-up requests. Clients",
        "start spread over about one request's duration (not fitted).",
        "",
        *_summary_lines(closed, f"All points ({len(closed)})"),
        "| point | | TTFT mean | TPOT mean | overloaded |",
        "|---|---|---|---|---|",
        *[_row(r, ("ttft_mean", "tpot_mean")) for r in closed],
        "",
        *_cpu_section(),
        "## Limits",
        "",
        "- TPOT is over-predicted by ~9% on the open-loop runs (both kernel models), most at the highest rate",
        "  where mixed prefill/decode iterations dominate; calibration fixed the ~10% under-prediction on the",
        "  70B FP8 closed-loop points.",
        "- Closed-loop TTFT depends on how the load generator's clients drift out of phase, which the data does",
        "  not record: starting them synchronised over-predicts TTFT up to 4x at high concurrency, spreading",
        "  them over one request under-predicts it up to 3x. The median error above is that of the latter.",
        "- The fitted client profile belongs to inference-perf with random-token prompts; real-text clients",
        "  see the first token (first_visible_token 1).",
        "",
    ]
    held_p50 = [r.errors()["ttft_p50"] for r in held if not r.measured_overloaded]
    print(f"held-out TTFT P50 median APE {statistics.median(held_p50):.1%}")
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
