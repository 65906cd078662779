"""The real engine's closed loop step by step, against ttftsim's: which requests each step prefilled.

    TTFTSIM_SERVE_LAYOUT=device-core [TTFTSIM_SERVE_DTYPE=float32] [TTFTSIM_SERVE_MODEL=small] .venv/bin/python \
        benchmarks/vllm_cpu/closed_loop_trace.py --tag TAG [--microbench FILE] [--compare-only]

Recorded (2026-12-04, an AVX2-only AMD EPYC VM, nothing else running; float32, since vLLM's CPU build runs
bfloat16 some 10x slower without AVX-512): tag fp32-amd1 with the 27 M model (`--microbench
benchmarks/vllm_cpu/microbench-fp32-amd1.json`) and small-fp32-amd1 with the 2-layer one
(microbench-small-fp32-amd1.json), each microbenchmark taken first with compare_serve.py's measure_steps in
the same layout; both compared with `--api-costs benchmarks/vllm_cpu/api_server_costs-device-core-small-fp32-amd1.json`
(the same variables, `.venv-vllm-cpu/bin/python benchmarks/vllm_cpu/api_server_costs.py --out FILE`: the API
server on the same host, the small model). The deployment has the API server on the engine
core's core (`engine.api_server_shares_core`), as this layout puts them.

A closed loop whose requests all have one length is a test of the engine's dynamics, not only of its costs:
requests that finish in the same step send again together and are prefilled together, so a round's grouping
(which requests get their first token in the same step) carries into the next, and whether groups persist or
break up decides the TTFT distribution (docs/accuracy.md: the fixed-length closed loops). This script records
the grouping where it happens: a sitecustomize probe, put in front of the server's PYTHONPATH through
serve_common.py's TTFTSIM_SERVER_PYTHONPATH (as gc_pauses.py does; nothing else changed), wraps vLLM's
Scheduler (add_request, schedule, update_from_output) in the engine core and logs, for every step, its start,
the tokens it scheduled for each request, and its end. `vllm bench serve` then runs closed loops of 8 and 4
clients, every prompt 256 tokens and 32 output tokens (serve_bench.py's closed-fixed-c8), and one with 16-48
output tokens (closed-spread-c8).

Compared with ttftsim (the vllm-bench client model; the server's engine arguments and API-server costs as the
deployment tests/data/reports/cpu-server-device-core.yaml gives them, measured by api_server_costs.py):
- the TTFT percentiles of the client;
- the sequence of prefill completions per step (how many requests finished their prompt in each step that
  finished one; ttftsim's from the requests' first-token times, which a step sets for all it completes),
  and the first step where the two differ.
The step costs are the engine's own: the five terms of compare.py's microbenchmark model (fixed, per prefill
token, per decode, per KV token read, per prefill query-key pair) fitted by NNLS to the durations of the
recorded steps (schedule to update_from_output), each step's shape counted as ttftsim counts it
(perf/batch.py BatchShapeBuilder.add). They are iteration times, not TTFTs: the question is whether the
scheduling dynamics reproduce given the step times (with one prompt length the fit cannot tell the prefill
terms apart; the sums it predicts are what count), and since the traced durations already hold the API
server's turns on the core, these costs are simulated without engine.api_server_shares_core.
`--microbench FILE` (compare_serve.py's step
microbenchmark of the same model and dtype, an independent measurement) predicts with its costs as well: the
prediction proper. closed-spread-c8's and closed-c8's lengths are drawn by ttftsim, not the run's own (its TTFTs
pooled over three seeds, the sequence of the first), so their sequences are not expected to match. Output:
serve_runs/closed-loop-trace-<tag>.json (the server, the engine's steps and the client's requests per
workload, and the comparison).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import nnls

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from serve_common import (  # noqa: E402
    DEVICE_CORE,
    DTYPE,
    ENGINE_ARGS,
    LAYOUT,
    MODEL_DIR,
    SERVER_CPUS,
    SERVER_ENV,
    VLLM_PYTHON,
    Server,
    loadavg,
    run_logged,
)

PROBE = """
import importlib.abc, os, sys, time
_dir = os.environ.get("TTFTSIM_TRACE_LOG")
_files = {}
def _log(line):
    f = _files.get(os.getpid())
    if f is None:
        f = _files[os.getpid()] = open(os.path.join(_dir, f"{os.getpid()}.log"), "a", buffering=1)
    f.write(f"{time.time():.6f} {line}\\n")
def _patch(mod):
    S = mod.Scheduler
    add, sched, update = S.add_request, S.schedule, S.update_from_output
    def add_request(self, request):
        _log(f"add {request.request_id} {request.num_prompt_tokens}")
        return add(self, request)
    def schedule(self, *args, **kwargs):
        start = time.time()
        out = sched(self, *args, **kwargs)
        items = " ".join(f"{r}:{n}" for r, n in out.num_scheduled_tokens.items())
        _log(f"sched {start:.6f} {items}")
        return out
    def update_from_output(self, *args, **kwargs):
        _log("done")
        return update(self, *args, **kwargs)
    S.add_request, S.schedule, S.update_from_output = add_request, schedule, update_from_output
class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self.inner = inner
    def create_module(self, spec):
        return self.inner.create_module(spec)
    def exec_module(self, module):
        self.inner.exec_module(module)
        _patch(module)
class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "vllm.v1.core.sched.scheduler":
            return None
        for finder in sys.meta_path:
            spec = None if finder is self else finder.find_spec(name, path, target)
            if spec is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None
if _dir:
    sys.meta_path.insert(0, _Finder())
"""

# name: (clients, requests, prompt tokens, output tokens), each a count or an inclusive range drawn uniformly
WORKLOADS: dict[str, tuple[int, int, int | tuple[int, int], int | tuple[int, int]]] = {
    "closed-fixed-c8": (8, 160, 256, 32),
    "closed-fixed-c4": (4, 80, 256, 32),
    "closed-spread-c8": (8, 160, 256, (16, 48)),
    "closed-c8": (8, 100, (64, 512), 32),  # serve_bench.py's closed-c8 (vllm bench), the twelve workloads' own
}
OUT_DIR = HERE / "serve_runs"
# the CPU server as a ttftsim deployment: its engine arguments and API-server costs (compare_serve.py's)
DEPLOYMENT = HERE.parents[1] / "tests" / "data" / "reports" / "cpu-server-device-core.yaml"
TRACED = "the engine's steps"
COST_TERMS = ("fixed_s", "per_token_s", "per_decode_token_s", "per_kv_token_s", "per_attn_pair_s")


# ------------------------------------------------------------------------------------------- measuring
def read_events(folder: Path, since: float) -> list[tuple[float, str, list[str]]]:
    events = []
    for path in folder.glob("*.log"):
        for line in path.read_text().splitlines():
            fields = line.split()
            if len(fields) >= 2 and float(fields[0]) >= since:
                events.append((float(fields[0]), fields[1], fields[2:]))
    events.sort(key=lambda e: e[0])
    return events


def engine_steps(events: list[tuple[float, str, list[str]]], t0: float) -> dict[str, Any]:
    """The engine's arrivals [(s, request, prompt tokens)] and steps [(start s, seconds, [(request, tokens)])],
    requests numbered in order of arrival, times from t0."""
    ids: dict[str, int] = {}
    adds, steps = [], []
    open_step: tuple[float, list[list[int]]] | None = None
    unpaired = 0  # a schedule before the last one's step ended: two batches in flight, which this does not pair
    for at, kind, rest in events:
        if kind == "add":
            ids[rest[0]] = len(ids)
            adds.append([round(at - t0, 6), ids[rest[0]], int(rest[1])])
        elif kind == "sched":
            unpaired += open_step is not None
            items = [item.rsplit(":", 1) for item in rest[1:]]
            open_step = (float(rest[0]), [[ids[r], int(n)] for r, n in items if r in ids])
        elif kind == "done" and open_step is not None:
            steps.append([round(open_step[0] - t0, 6), round(at - open_step[0], 6), open_step[1]])
            open_step = None
    if unpaired:
        raise SystemExit(f"{unpaired} steps scheduled while another ran (async scheduling?): not a trace this reads")
    return {"adds": adds, "steps": steps}


def measure(tag: str, names: list[str]) -> dict[str, Any]:
    import serve_bench as sb  # the prompts and the client command of the serve runs

    if not (MODEL_DIR / "tokenizer.json").exists():
        subprocess.run([str(VLLM_PYTHON), str(HERE / "serve_common.py")], check=True, timeout=900)
    for folder in (sb.DATA, sb.RAW):
        folder.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"tag": tag, "layout": LAYOUT, "dtype": DTYPE, "engine": ENGINE_ARGS, "workloads": {}}
    record["model_config"] = json.loads((MODEL_DIR / "config.json").read_text())  # simulated as served
    with tempfile.TemporaryDirectory() as probe, tempfile.TemporaryDirectory() as logs:
        (Path(probe) / "sitecustomize.py").write_text(PROBE)
        os.environ["TTFTSIM_SERVER_PYTHONPATH"] = probe
        server = Server(8011, sb.RAW / f"server-{tag}.log", cpus=SERVER_CPUS, extra_env={"TTFTSIM_TRACE_LOG": logs})
        record["server"] = {"command": server.command(), "env": SERVER_ENV}
        try:
            record["server"]["startup_s"] = server.start()
            record["server"]["warm_shapes_s"] = server.warm_shapes()
            for index, name in enumerate(names):
                clients, n, prompt, out = WORKLOADS[name]
                spread = out if isinstance(out, tuple) else None
                low, high = prompt if isinstance(prompt, tuple) else (prompt, prompt)
                ds = sb.DATA / f"{tag}-{name}-vb.jsonl"
                sb.write_prompts(ds, 1000 + index, n, low, high, out if spread is None else 0, out_range=spread)
                cmd, raw = sb.vllm_bench(
                    server, f"{tag}-{name}-vb", ds, n, math.inf, ["--max-concurrency", str(clients)]
                )
                start, load = time.time(), loadavg()
                status = run_logged(cmd, 600, sb.RAW / f"{tag}-{name}.log")
                time.sleep(0.5)
                client = sb.parse_vllm_bench(raw)
                trace = engine_steps(read_events(Path(logs), start), start)
                print(f"{name}: rc {status['rc']}, {len(trace['steps'])} steps", flush=True)
                record["workloads"][name] = {
                    "clients": clients,
                    "prompt_tokens": list(prompt) if isinstance(prompt, tuple) else prompt,
                    "output_tokens": list(spread) if spread else out,
                    "command": cmd,
                    "client_rc": status["rc"],
                    "loadavg_start": load,
                    "requests": client["requests"],
                    **trace,
                }
        finally:
            server.stop()
    return record


# ------------------------------------------------------------------------------------------- comparing
def step_rows(adds: list[list[int]], steps: list[list[Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Each step's five cost terms as ttftsim counts them (perf/batch.py BatchShapeBuilder.add): a sequence with
    one new token after a context is a decode reading context + 1; otherwise a prefill chunk of new tokens
    after ctx, new x ctx + new (new + 1) / 2 query-key pairs, reading ctx + new."""
    computed = {rid: 0 for _, rid, _ in adds}
    rows, seconds = [], []
    for _, duration, items in steps:
        prefill = decodes = kv = pairs = 0
        for rid, new in items:
            ctx = computed[rid]
            if new == 1 and ctx > 0:
                decodes += 1
                kv += ctx + 1
            else:
                prefill += new
                pairs += new * ctx + new * (new + 1) // 2
                kv += ctx + new
            computed[rid] = ctx + new
        rows.append([1.0, prefill, decodes, kv, pairs])
        seconds.append(duration)
    return np.asarray(rows), np.asarray(seconds)


def fit_trace_cost(record: dict[str, Any]) -> dict[str, Any]:
    rows, seconds = zip(*(step_rows(w["adds"], w["steps"]) for w in record["workloads"].values()), strict=True)
    a, y = np.vstack(rows), np.concatenate(seconds)
    coef, _ = nnls(a, y)
    error = np.abs(a @ coef - y) / y
    fit = dict(zip(COST_TERMS, map(float, coef), strict=True))
    return {**fit, "steps": len(y), "median_abs_error": float(np.median(error))}


def real_groups(workload: dict[str, Any]) -> list[int]:
    """How many requests finished their prompt in each step that finished one (the engine's own record)."""
    left = {rid: tokens for _, rid, tokens in workload["adds"]}
    groups = []
    for _, _, items in workload["steps"]:
        finished = 0
        for rid, new in items:
            if left[rid] > 0:
                left[rid] -= new
                finished += left[rid] <= 0
        if finished:
            groups.append(finished)
    return groups


def simulated(
    workload: dict[str, Any],
    cost: dict[str, float],
    deployment: Path,
    model: Path | None = None,
    api: dict[str, float] | None = None,
    shares_core: bool | None = None,
) -> tuple[np.ndarray, list[int]]:
    """ttftsim's TTFTs of the workload and its prefill completions per step (the requests' first-token times:
    a step sets them for all it completes), with the deployment's engine and API server, these step costs, the
    served model's config.json (default: the deployment's) and API-server costs with the front end's latency
    (`frontend_overhead_s` among them; default: the deployment's), and whether the API server shares the engine
    core's core (default: as the deployment says)."""
    import yaml

    from ttftsim.config.scenario import Scenario
    from ttftsim.simulate import simulate

    def lengths(value: int | list[int]) -> dict[str, Any]:
        if isinstance(value, list):
            return {"type": "uniform", "low": value[0], "high": value[1]}
        return {"type": "fixed", "value": value}

    data = yaml.safe_load(deployment.read_text())
    data["name"] = "closed loop trace"
    if model is not None:
        data["model"] = str(model)
    if shares_core is not None:
        data["engine"]["api_server_shares_core"] = shares_core
    if api is not None:
        costs = dict(api)
        data["engine"]["frontend_overhead_s"] = costs.pop("frontend_overhead_s")
        data["engine"]["api_server"] = {**data["engine"]["api_server"], **costs}
    data["workload"] = {
        "type": "synthetic",
        "arrivals": {"type": "closed_loop", "clients": workload["clients"]},
        "prompt_tokens": lengths(workload["prompt_tokens"]),
        "output_tokens": lengths(workload["output_tokens"]),
        "num_requests": len(workload["requests"]),
    }
    data["client"] = {"tool": "vllm-bench", "dataset_entries": "unique"}
    data["measured_step_cost"] = {k: cost[k] for k in COST_TERMS} | {"source": "closed_loop_trace.py"}
    drawn = any(isinstance(workload[k], list) for k in ("prompt_tokens", "output_tokens"))
    scenario = Scenario.model_validate(data)
    frames = [simulate(scenario, deployment.parent, seed=seed).requests for seed in range(3 if drawn else 1)]
    groups = frames[0]["first_token_s"].dropna().round(9).value_counts().sort_index().tolist()
    return np.concatenate([frame["ttft_s"].dropna().to_numpy() for frame in frames]), groups


def first_difference(real: list[int], predicted: list[int]) -> int | None:
    for index, (a, b) in enumerate(zip(real, predicted, strict=False)):
        if a != b:
            return index
    return None if len(real) == len(predicted) else min(len(real), len(predicted))


def host_api_costs(path: Path) -> dict[str, float]:
    """An api_server_costs.py measurement as compare_serve.py reads it, with the front end's latency."""
    import compare_serve as cs

    default, cs.COSTS["api"] = cs.COSTS["api"], path  # compare_serve reads the file it names there
    try:
        api = cs.api_costs(zero=False)
        return {**api, "frontend_overhead_s": cs.frontend_overhead_s(api)}
    finally:
        cs.COSTS["api"] = default


def compare(
    record: dict[str, Any], microbench: Path | None, deployment: Path = DEPLOYMENT, api_costs: Path | None = None
) -> dict[str, Any]:
    api = host_api_costs(api_costs) if api_costs is not None else None
    costs = {TRACED: fit_trace_cost(record)}
    if microbench is not None:
        import compare_serve as cs

        costs["the microbenchmark"] = cs.step_cost(microbench)
    result: dict[str, Any] = {"step_costs": costs, "api_costs": str(api_costs) if api_costs else None, "workloads": {}}
    folder = tempfile.TemporaryDirectory()
    model = None
    if "model_config" in record:
        model = Path(folder.name) / "config.json"
        model.write_text(json.dumps(record["model_config"]))
    for name, workload in record["workloads"].items():
        measured = np.array([r["ttft_s"] for r in workload["requests"] if r["error"] is None])
        real = real_groups(workload)
        row: dict[str, Any] = {"measured_ttft_p50_p90_p99": np.percentile(measured, [50, 90, 99]).tolist()}
        row["real_groups"] = real
        for label, cost in costs.items():
            # the traced steps' durations already hold the API server's turns on the core
            traced = False if label == TRACED else None
            ttft, groups = simulated(workload, cost, deployment, model, api, traced)
            row[label] = {
                "ttft_p50_p90_p99": np.percentile(ttft, [50, 90, 99]).tolist(),
                "groups": groups,
                "first_difference": first_difference(real, groups),
            }
        result["workloads"][name] = row
    folder.cleanup()
    return result


def report(result: dict[str, Any]) -> None:
    for label, cost in result["step_costs"].items():
        terms = ", ".join(f"{k} {v:.3g}" for k, v in cost.items())
        print(f"step cost from {label}: {terms}")
    for name, row in result["workloads"].items():
        ms = " / ".join(f"{1e3 * v:.0f}" for v in row["measured_ttft_p50_p90_p99"])
        print(f"\n{name}: measured TTFT P50/P90/P99 {ms} ms")
        print(f"  real prefill completions per step: {' '.join(map(str, row['real_groups'][:40]))}")
        for label in result["step_costs"]:
            sim = row[label]
            ps = " / ".join(f"{1e3 * v:.0f}" for v in sim["ttft_p50_p90_p99"])
            diff = sim["first_difference"]
            same = "identical" if diff is None else f"first differs at completion step {diff}"
            print(f"  ttftsim, step cost from {label}: TTFT {ps} ms; {same}")
            print(f"    {' '.join(map(str, sim['groups'][:40]))}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", default="trace1")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--microbench", type=Path, default=None)
    ap.add_argument("--deployment", type=Path, default=DEPLOYMENT, help="engine and API-server costs (a scenario)")
    ap.add_argument("--api-costs", type=Path, default=None, help="api_server_costs.py output of this host")
    ap.add_argument("--compare-only", action="store_true", help="re-compare a recorded trace (no vLLM needed)")
    args = ap.parse_args()
    out = OUT_DIR / f"closed-loop-trace-{args.tag}.json"
    if args.compare_only:
        if not out.exists():
            raise SystemExit(f"{out}: no recorded trace of tag {args.tag!r} (record one without --compare-only)")
        record = json.loads(out.read_text())
    else:
        if not DEVICE_CORE:
            raise SystemExit("TTFTSIM_SERVE_LAYOUT: record in the device-core layout, which the deployment describes")
        if not VLLM_PYTHON.exists():
            raise SystemExit(f"{VLLM_PYTHON}: no vLLM CPU venv (benchmarks/vllm_cpu/run.sh installs it)")
        names = args.workloads.split(",")
        if unknown := [name for name in names if name not in WORKLOADS]:
            raise SystemExit(f"--workloads: unknown {unknown[0]!r} (known: {', '.join(WORKLOADS)})")
        record = measure(args.tag, names)
        out.write_text(json.dumps(record, separators=(",", ":")))  # the recording first: a comparison may fail
    record["comparison"] = compare(record, args.microbench, args.deployment, args.api_costs)
    out.write_text(json.dumps(record, separators=(",", ":")))
    report(record["comparison"])
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
