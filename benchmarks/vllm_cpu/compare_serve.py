"""Real vLLM's OpenAI server (CPU build 0.32) driven by real clients, against ttftsim, per workload.

    .venv/bin/python benchmarks/vllm_cpu/compare_serve.py [--tag run1] [--microbench FILE]

Inputs (nothing here is fitted to a measured TTFT or TPOT):
- serve_runs/<workload>-<client>/<tag>.json (serve_bench.py): what each real client sent (send times,
  prompt and output lengths) and measured (per-request TTFT);
- the step-cost microbenchmark of the same model and engine arguments (run_engine.py's controlled
  iterations, in-process), fitted by NNLS as compare.py does: fixed + per token + per KV token + per pair;
- api_server_costs.json (api_server_costs.py): the API-server process's CPU time per request, per prompt
  token and per streamed token;
- the front end's fixed latency, measured by api_server_costs.py at idle (one 16-token request at a time:
  the client's TTFT minus the in-process add_request + step) less the API-server work the model already
  charges that request (per request, its prompt tokens, one step with one token): the HTTP, ZMQ and
  process hand-offs that are latency, not CPU work (`frontend_overhead_s`);
- the clients' turnaround (a response's end -> the next send), measured from the closed-loop runs' own
  timestamps.
`--against TAG` also prints how far the same workloads measured again (another tag) moved: the floor
under any model's error on one run.
Open-loop runs replay the requests as sent; closed-loop runs simulate the tool's clients (ttftsim/workload/
clients.py) with the run's lengths distribution. Each is predicted with and without the API-server model.
Tags run4 and run5 (2026-12-01) were measured back to back on an otherwise idle machine (nothing else
running; run3 and earlier shared the two cores with other work, which slowed the server by an unknown
factor), the server's processes not pinned, the clients on CPU 1. With TTFTSIM_SERVE_LAYOUT=device-core
(serve_common.py) the defaults are run8 and run9 and the output serve_compare-device-core.json (another --tag
writes serve_compare-device-core-TAG.json unless --out says otherwise);
serve_compare-device-core-cold.json is run6 against run7, written before the token-count warm-up existed (its
microbenchmark ran without it, so the current script does not reproduce that file's step cost).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import simpy

from ttftsim.accuracy.ground_truth import CLIENT_BOUND_SHARE
from ttftsim.accuracy.reports.measured import late_first_tokens
from ttftsim.config.scenario import Scenario
from ttftsim.engine.engine import Engine
from ttftsim.engine.recorder import Recorder
from ttftsim.replica import build_replica
from ttftsim.simulate import simulate
from ttftsim.workload.request import Request

HERE = Path(__file__).resolve().parent
RUNS = HERE / "serve_runs"
ROOT = HERE.parents[1]
ENGINE = {"block_size": 32, "max_num_batched_tokens": 512, "max_num_seqs": 32, "max_model_len": 2048}
SHARED_PREFIX_TOKENS = 384
sys.path.insert(0, str(HERE))
from serve_common import API_COSTS, DEVICE_CORE, MODEL_DIR, SERVER_CPUS, SERVER_ENV, hand_offs_s  # noqa: E402

# The served model's config.json as the server had it; without the vLLM work folder (a fresh checkout predicting
# with --step-cost-from, no vLLM needed) the committed copy of the same config.
COMMITTED_MODELS = {
    "serve-model": ROOT / "tests" / "data" / "reports" / "cpu-server-model",
    "serve-model-small": HERE / "serve-model-small",
}
MODEL = MODEL_DIR / "config.json"
if not MODEL.exists():
    MODEL = COMMITTED_MODELS[MODEL_DIR.name] / "config.json"

SUFFIX = "-device-core" if DEVICE_CORE else ""
OUT = HERE / f"serve_compare{SUFFIX}.json"


def measure_steps(out: Path) -> None:
    """Time controlled iterations of the served model (run_engine.py, the vLLM venv) as the server runs
    them: the multiprocess executor (the forward pass in a worker process, as the CPU server's `mp`
    backend), placed as the server's processes are (serve_common.LAYOUT: not pinned, or the worker alone on
    CPU 0 and the engine core on CPU 1)."""
    import os
    import subprocess

    plan = out.with_suffix(".plan.json")
    engine = {**ENGINE, "distributed_executor_backend": "mp"}
    plan.write_text(json.dumps({"model": str(MODEL.parent), "engines": {"main": engine}, "workloads": []}))
    python = ROOT / ".venv-vllm-cpu" / "bin" / "python"
    pin = ["taskset", "-c", SERVER_CPUS] if SERVER_CPUS else []
    subprocess.run(
        [*pin, str(python), str(HERE / "run_engine.py"), str(plan), str(out)],
        check=True,
        timeout=1800,
        env={**os.environ, **SERVER_ENV, **({"TTFTSIM_WARM_SHAPES": "1"} if DEVICE_CORE else {})},
    )


def step_cost(microbench: Path) -> dict[str, float]:
    sys.path.insert(0, str(HERE))
    from compare import fit_step_cost  # the same NNLS fit as the in-process comparison

    data = json.loads(microbench.read_text())
    points = data["engines"]["main"]["microbenchmark"]
    return fit_step_cost(points)


COSTS = {"api": API_COSTS}  # --api-costs: the API-server measurement of the machine the runs were on


def api_costs(zero: bool) -> dict[str, float]:
    if zero:
        return {"per_request_s": 0.0, "per_prompt_token_s": 0.0, "per_output_token_s": 0.0, "per_step_s": 0.0}
    fit = json.loads(COSTS["api"].read_text())["http"]["fit_api_server_with_steps"]
    return {
        "per_request_s": max(0.0, fit["per_request_s"]),
        "per_prompt_token_s": max(0.0, fit["per_prompt_token_s"]),
        "per_output_token_s": max(0.0, fit["per_token_s"]),
        "per_step_s": max(0.0, fit["per_step_s"]),
    }


def frontend_overhead_s(api: dict[str, float]) -> float:
    """The idle front end's latency that is not API-server work the model already charges (see above)."""
    idle = json.loads(COSTS["api"].read_text())["idle_frontend_latency_ms"]
    costs = (api["per_request_s"], api["per_prompt_token_s"], api["per_step_s"], api["per_output_token_s"])
    return max(0.0, hand_offs_s(idle["frontend_p50_ms"], *costs))


def scenario(
    cost: dict[str, float], api: dict[str, float], workload: dict[str, Any], client: dict[str, Any]
) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "serve",
            "model": str(MODEL),
            "hardware": "CPU-host",
            "engine": {
                **ENGINE,
                "vllm_version": "0.32",
                "num_gpu_blocks_override": 2730,
                "api_server": api,
                # device-core: the API server and the engine core share CPU 1 (serve_common.py)
                "api_server_shares_core": DEVICE_CORE and any(api.values()),
                "frontend_overhead_s": frontend_overhead_s(api) if any(api.values()) else 0.0,
            },
            "workload": workload,
            "client": client,
            "measured_step_cost": {**cost, "source": "run_engine.py microbenchmark"},
        }
    )


def open_loop(run: dict[str, Any], sc: Scenario, shared_prefix: bool) -> np.ndarray:
    replica = build_replica(sc, ROOT)
    env, recorder = simpy.Environment(), Recorder(sc.engine.frontend_overhead_s)
    engine = Engine(env, replica.engine, replica.cost, replica.num_blocks, recorder)
    ok = [r for r in run["requests"] if r.get("error") in (None, "") and r.get("ttft_s") is not None]
    ok.sort(key=lambda r: r["send_s"])
    requests = []
    for i, r in enumerate(ok):
        prompt = int(r["prompt_tokens"])
        segments: tuple[tuple[int, int], ...] = ((10_000 + i, prompt),)
        if shared_prefix:
            segments = ((1, SHARED_PREFIX_TOKENS), (10_000 + i, prompt - SHARED_PREFIX_TOKENS))
        requests.append(
            Request(i, float(r["send_s"]), prompt, int(r["output_tokens"]), segments, private=not shared_prefix)
        )
    engine.attach_feed(requests)
    env.run()
    frame = recorder.requests_frame()
    return frame["ttft_s"].dropna().to_numpy()


def turnaround(run: dict[str, Any]) -> float:
    """Median gap between a response's end and the next send (closed loop: each send follows a finish)."""
    ok = [r for r in run["requests"] if r.get("ttft_s") is not None]
    ends = np.sort([r["send_s"] + r["latency_s"] for r in ok])
    gaps = []
    for r in ok:
        before = ends[ends <= r["send_s"]]
        if len(before):
            gaps.append(r["send_s"] - before[-1])
    return float(np.median(gaps)) if gaps else 0.0


def closed_loop(run: dict[str, Any], sc_base: dict[str, Any], tool: str, clients: int, delta: float) -> np.ndarray:
    """The tool's clients in ttftsim: the run's lengths (prompts uniform 64-512 or fixed; outputs fixed, a
    normal draw per request for aiperf's --output-tokens-stddev, or uniform for serve_bench's closed-spread), its
    warm-up phase, its request count; TTFTs of the measured phase, pooled over three seeds."""
    ok = [r for r in run["requests"] if r.get("ttft_s") is not None]
    outputs = int(np.median([r["output_tokens"] for r in ok if r["output_tokens"] is not None]))
    warmup = int(run["params"].get("warmup_requests", 0))
    fixed = run["params"].get("prompt_tokens")
    prompts = (
        {"type": "fixed", "value": fixed} if isinstance(fixed, int) else {"type": "uniform", "low": 64, "high": 512}
    )
    asked: dict[str, Any] = {"type": "fixed", "value": outputs}
    stddev = float(run["params"].get("output_tokens_stddev") or 0.0)
    if stddev:  # aiperf --output-tokens-stddev S: each length a rounded positive normal draw around the mean
        asked = {"type": "normal", "mean": float(run["params"]["output_tokens"]), "std": stddev, "low": 1}
    if "output_tokens_range" in run["params"]:  # serve_bench's closed-spread: uniform per request
        low, high = run["params"]["output_tokens_range"]
        asked = {"type": "uniform", "low": int(low), "high": int(high)}
    workload = {
        "type": "synthetic",
        "arrivals": {"type": "closed_loop", "clients": clients},
        "prompt_tokens": prompts,
        "output_tokens": asked,
        "num_requests": len(ok),
    }
    # every run here sent one prompt per request (warm-up included) from its own input file. vllm-bench's measured
    # gap is its one process's work per send; GuideLLM's and aiperf's a latency each client waits on its own
    # (ttftsim/workload/clients.py)
    gap = {"send_s": delta} if tool == "vllm-bench" else {"turnaround_s": delta}
    client = {"tool": tool, **gap, "warmup_requests": warmup, "dataset_entries": "unique"}
    ttfts = []
    for seed in range(3):
        frame = simulate(scenario(sc_base["cost"], sc_base["api"], workload, client), ROOT, seed=seed).requests
        ttfts.append(frame[frame["request_id"] >= warmup]["ttft_s"].dropna().to_numpy())
    return np.concatenate(ttfts)


def pct(values: np.ndarray) -> list[float]:
    return [float(np.percentile(values, q)) for q in (50, 90, 99)]


def load_runs(tag: str) -> dict[str, dict[str, Any]]:
    """The runs of one tag, by workload folder (the rate step's corrected re-run where there is one)."""
    runs = {}
    for folder in sorted(p for p in RUNS.iterdir() if p.is_dir()):
        path = folder / f"{tag}.json"
        if folder.name.startswith("rate-step") and (folder / f"{tag}b.json").exists():
            path = folder / f"{tag}b.json"
        if path.exists():
            runs[folder.name] = json.loads(path.read_text())
    return runs


def predict(
    name: str, run: dict[str, Any], cost: dict[str, float], delta: dict[str, float], values: bool = False
) -> dict[str, Any]:
    """Measured and predicted TTFT percentiles of one run, with and without the API-server model (with values:
    each one's TTFTs too, under "values", for pooling)."""
    kept = [r for r in run["requests"] if r.get("ttft_s") is not None and r.get("phase", "profiling") == "profiling"]
    tool = {"vllmbench": "vllm-bench", "vllm-bench": "vllm-bench", "aiperf": "aiperf"}.get(run["client"], "guidellm")
    predicted, raw = {}, {}
    for label, zero in (("engine only", True), ("with API server", False)):
        api = api_costs(zero)
        if name.startswith(("closed", "capacity")):
            clients = int(run["params"]["closed_loop_concurrency"])
            ttfts = closed_loop(run, {"cost": cost, "api": api}, tool, clients, delta.get(run["client"], 0.0))
        else:
            placeholder = {  # the requests are fed directly; the scenario only carries engine and costs
                "type": "synthetic",
                "arrivals": {"type": "poisson", "rate": 1.0},
                "prompt_tokens": {"type": "fixed", "value": 64},
                "output_tokens": {"type": "fixed", "value": 1},
                "num_requests": 1,
            }
            ttfts = open_loop(run, scenario(cost, api, placeholder, {"tool": tool}), name.startswith("shared"))
        predicted[label], raw[label] = pct(ttfts), ttfts
    measured = np.array([r["ttft_s"] for r in kept])
    late = late_reads(kept)
    row = {"workload": name, "client": run["client"], "n": len(measured), "measured": pct(measured), **predicted}
    row |= {"late_first_tokens": late, "client_bound": is_client_bound(*late)}
    return {**row, "values": {"measured": measured, **raw}} if values else row


def late_reads(requests: list[dict[str, Any]]) -> list[int]:
    """[first tokens the client timed with the request's last, requests of two or more output tokens]: the
    readers' rule (ttftsim/accuracy/reports/measured.py late_first_tokens)."""
    done = [r for r in requests if r.get("latency_s") is not None and r.get("output_tokens") is not None]
    late, multi = late_first_tokens(
        [r["ttft_s"] for r in done], [r["latency_s"] for r in done], [int(r["output_tokens"]) for r in done]
    )
    return [late, multi]


def is_client_bound(late: int, multi: int) -> bool:
    """StageTruth.is_client_bound's rule: CLIENT_BOUND_SHARE or more of the first tokens timed with the last."""
    return late > 0 and late >= CLIENT_BOUND_SHARE * multi


def pooled(first: list[dict[str, Any]], again: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each workload measured twice, both runs' TTFTs pooled, against both predictions pooled: percentiles of
    twice the requests, so less of each run's own sampling noise."""
    rows = []
    for a in first:
        b = next((r for r in again if r["workload"] == a["workload"]), None)
        if b is None:
            continue
        both = {k: np.concatenate([a["values"][k], b["values"][k]]) for k in a["values"]}
        late = [x + y for x, y in zip(a["late_first_tokens"], b["late_first_tokens"], strict=True)]
        rows.append(
            {
                "workload": a["workload"],
                "client": a["client"],
                "n": len(both["measured"]),
                **{k: pct(v) for k, v in both.items()},
                "late_first_tokens": late,
                "client_bound": is_client_bound(*late),
            }
        )
    return rows


def repeatability(first: dict[str, Any], again: dict[str, Any], tag: str) -> dict[str, Any]:
    """The same workloads measured twice: each percentile's change relative to the first run."""
    rows, changes = [], []
    for name in sorted(set(first) & set(again)):
        a, b = (
            pct(
                np.array(
                    [
                        r["ttft_s"]
                        for r in run["requests"]
                        if r.get("ttft_s") is not None and r.get("phase", "profiling") == "profiling"
                    ]
                )
            )
            for run in (first[name], again[name])
        )
        rows.append({"workload": name, "first": a, "again": b})
        changes.append([abs(y - x) / x for x, y in zip(a, b, strict=True)])
    med = np.median(np.asarray(changes), axis=0).tolist() if changes else []
    return {"tag": tag, "rows": rows, "median_abs_change": med}


def median_errors(rows: list[dict[str, Any]], key: str, scored_only: bool) -> tuple[list[float], int]:
    """Median APE of TTFT P50/P90/P99 over the rows (scored_only: those not client-bound), and their count."""
    errs = [
        [abs(p - m) / m for p, m in zip(r[key], r["measured"], strict=True)]
        for r in rows
        if not (scored_only and r.get("client_bound"))
    ]
    return np.median(np.asarray(errs), axis=0).tolist(), len(errs)


def report(rows: list[dict[str, Any]]) -> None:
    print(f"{'workload':<28}{'n':>4}  {'measured P50/P90/P99':>22}  {'engine only':>22}  {'with API server':>22}")
    for r in rows:
        keys = ("measured", "engine only", "with API server")
        cells = "  ".join("{:6.0f}{:8.0f}{:8.0f}".format(*(x * 1e3 for x in r[k])) for k in keys)
        late = "  client-bound ({} of {} first tokens timed with the last)".format(*r["late_first_tokens"])
        print(f"{r['workload']:<28}{r['n']:>4}  {cells}{late if r['client_bound'] else ''}")
    for k in ("engine only", "with API server"):
        (p50, p90, p99), n = median_errors(rows, k, scored_only=True)
        (a50, a90, a99), total = median_errors(rows, k, scored_only=False)
        print(
            f"{k}: median APE P50 {p50:.1%}, P90 {p90:.1%}, P99 {p99:.1%} over {n} workloads not client-bound; "
            f"all {total}: {a50:.1%}, {a90:.1%}, {a99:.1%}"
        )


def main() -> int:
    parser = argparse.ArgumentParser()
    tags = ("run8", "run9") if DEVICE_CORE else ("run4", "run5")  # each layout's latest pair
    parser.add_argument("--tag", default=tags[0])
    parser.add_argument("--against", default=tags[1], help="another tag of the same workloads ('' = none)")
    parser.add_argument("--out", type=Path, help=f"default {OUT.name} for the layout's tag {tags[0]}, else -TAG added")
    default = ROOT / ".venv-vllm-cpu" / "ttftsim-work" / f"serve-microbench{SUFFIX}.json"
    parser.add_argument("--microbench", type=Path, default=default)
    parser.add_argument("--remeasure", action="store_true", help="time the step-cost microbenchmark again")
    parser.add_argument("--api-costs", type=Path, default=API_COSTS, help="api_server_costs.py's output")
    parser.add_argument(
        "--step-cost-from", type=Path, help="take the step cost an earlier output of this script recorded (no vLLM)"
    )
    args = parser.parse_args()
    if args.out is None:  # another tag's results never overwrite the default tag's committed file
        args.out = OUT if args.tag == tags[0] else OUT.with_name(f"{OUT.stem}-{args.tag}.json")
    COSTS["api"] = args.api_costs
    if args.step_cost_from:
        cost = json.loads(args.step_cost_from.read_text())["step_cost"]
    else:
        if args.remeasure or not args.microbench.exists():
            measure_steps(args.microbench)
        cost = step_cost(args.microbench)
    runs = load_runs(args.tag)
    turnarounds: dict[str, list[float]] = {}
    for name, run in runs.items():
        if name.startswith(("closed", "capacity")):
            turnarounds.setdefault(run["client"], []).append(turnaround(run))  # measured, per tool
    delta = {tool: float(np.median(v)) for tool, v in turnarounds.items()}
    full = [predict(name, run, cost, delta, values=bool(args.against)) for name, run in runs.items()]
    rows = [{k: v for k, v in r.items() if k != "values"} for r in full]
    api = api_costs(False)
    summary = {
        "step_cost": cost,
        "api_server": api,
        "frontend_overhead_s": frontend_overhead_s(api),
        "turnaround_s": delta,
        "tag": args.tag,
        "rows": rows,
    }
    if args.against:
        again = load_runs(args.against)
        summary["repeat"] = repeatability(runs, again, args.against)
        summary["pooled"] = pooled(full, [predict(name, run, cost, delta, values=True) for name, run in again.items()])
    args.out.write_text(json.dumps(summary, indent=1, default=float) + "\n")
    print(f"step cost {cost}\nfront-end latency {summary['frontend_overhead_s'] * 1e3:.2f} ms\nturnaround {delta}")
    report(rows)
    if args.against:
        repeat = summary["repeat"]
        for r in repeat["rows"]:
            cells = "  ".join("{:6.0f}{:8.0f}{:8.0f}".format(*(x * 1e3 for x in r[k])) for k in ("first", "again"))
            print(f"{r['workload']:<28}{cells}")
        med = repeat["median_abs_change"]
        print(f"measured again ({args.against}): median |change| P50 {med[0]:.1%}, P90 {med[1]:.1%}, P99 {med[2]:.1%}")
        print(f"both runs pooled ({args.tag} + {args.against}), each predicted as sent:")
        report(summary["pooled"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
