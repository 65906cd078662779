"""Closed loop with fixed lengths through aiperf, as AIConfigurator measures its closed-loop points.

    .venv-vllm-cpu/bin/python benchmarks/vllm_cpu/aiperf_closed.py [--tag run3]

Needs .venv-aiperf (`python3 -m venv .venv-aiperf && .venv-aiperf/bin/pip install aiperf==0.13.0`). Starts
the real vLLM CPU server (not pinned, as serve_bench.py --server-cpus ""; with TTFTSIM_SERVE_LAYOUT=device-core
placed as serve_common.py says, its token counts warmed), then for each concurrency c runs
`aiperf profile --concurrency c --request-count 20c --warmup-request-count 2c` with fixed 256-token prompts
(random "tN" words from an input file, so no two share a block) and 32 output tokens (ignore_eos), and
writes serve_runs/closed-fixed-c<c>-aiperf/<tag>.json in serve_bench.py's per-request format (profiling
phase only). This is the client behaviour ttftsim's `client: {tool: aiperf}` models (warm-up, barrier,
every client at once), on real components.

`--output-stddev S` asks aiperf for output lengths drawn per request (`--output-tokens-stddev S`: a normal
around 32, rounded, positive; ignore_eos so each request generates what it asked for) and writes
closed-spread-c<c>-aiperf instead: requests that started together no longer finish together
(benchmarks/closed_loop_harness.py). `--concurrency` picks the concurrencies (default 4,8).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from serve_common import DEVICE_CORE, MODEL_DIR, ROOT, SERVER_CPUS, Server, num_t_words, prepare_model  # noqa: E402

AIPERF = ROOT / ".venv-aiperf" / "bin" / "aiperf"
RAW = ROOT / ".venv-vllm-cpu" / "ttftsim-work" / "aiperf-raw"
PROMPT_TOKENS, OUTPUT_TOKENS = 256, 32
CONCURRENCIES = (4, 8)


def write_prompts(path: Path, count: int, rng: np.random.Generator) -> None:
    words = num_t_words()
    with path.open("w") as handle:
        for _ in range(count):
            ids = rng.integers(1, words, PROMPT_TOKENS)
            handle.write(json.dumps({"text": " ".join(f"t{i}" for i in ids)}) + "\n")


def output_length(record: dict[str, Any], stddev: float) -> int | None:
    """The tokens the request generated; where aiperf does not say, the fixed length asked for (None when the
    lengths were drawn)."""
    value = record.get("metrics", {}).get("output_sequence_length", {}).get("value")
    if value is not None:
        return int(value)
    return None if stddev else OUTPUT_TOKENS


def workload_name(concurrency: int, stddev: float) -> str:
    return f"closed-{'spread' if stddev else 'fixed'}-c{concurrency}"


def records(artifacts: Path) -> list[dict[str, Any]]:
    found = sorted(artifacts.rglob("profile_export.jsonl"))
    if not found:
        raise FileNotFoundError(f"no profile_export.jsonl under {artifacts}")
    return [json.loads(line) for line in found[0].read_text().splitlines() if line.strip()]


def metric(record: dict[str, Any], name: str) -> float | None:
    value = record.get("metrics", {}).get(name)
    if value is None:
        return None
    scale = {"ms": 1e-3, "ns": 1e-9, "s": 1.0, "us": 1e-6}.get(value.get("unit", "ms"), 1e-3)
    return float(value["value"]) * scale


def run(server: Server, concurrency: int, tag: str, rng: np.random.Generator, stddev: float = 0.0) -> dict[str, Any]:
    warmup, count = 2 * concurrency, 20 * concurrency
    out_dir = RAW / f"{tag}-{workload_name(concurrency, stddev)}"
    if not stddev and not out_dir.exists() and (RAW / f"{tag}-c{concurrency}").exists():
        out_dir = RAW / f"{tag}-c{concurrency}"  # a fixed-length run from before the spread ones (run3-run10)
    out_dir.mkdir(parents=True, exist_ok=True)
    prompts = out_dir / "prompts.jsonl"
    write_prompts(prompts, warmup + count, rng)
    cmd = [
        str(AIPERF), "profile",
        "--model", str(MODEL_DIR), "--tokenizer", str(MODEL_DIR),
        "--url", server.base, "--endpoint-type", "completions", "--streaming",
        "--input-file", str(prompts), "--custom-dataset-type", "single_turn",
        "--output-tokens-mean", str(OUTPUT_TOKENS), "--output-tokens-stddev", f"{stddev:g}",
        "--extra-inputs", "ignore_eos:true",
        "--concurrency", str(concurrency), "--request-count", str(count),
        "--warmup-request-count", str(warmup),
        "--artifact-dir", str(out_dir / "artifacts"), "--ui", "none",
    ]  # fmt: skip
    load0 = Path("/proc/loadavg").read_text().strip()
    started = time.time()
    if server.proc is not None:  # --reparse reads the artifacts of an earlier run
        proc = subprocess.run(["taskset", "-c", "1", *cmd], capture_output=True, text=True, timeout=900)
        (out_dir / "aiperf.log").write_text(proc.stdout[-20000:] + proc.stderr[-20000:])
    rows = records(out_dir / "artifacts")
    first = min(r["metadata"]["request_start_ns"] for r in rows)
    requests = []
    for r in sorted(rows, key=lambda r: r["metadata"]["request_start_ns"]):
        meta = r["metadata"]
        requests.append(
            {
                "phase": meta.get("benchmark_phase"),
                "send_s": (meta["request_start_ns"] - first) / 1e9,
                "credit_issued_s": (meta["credit_issued_ns"] - first) / 1e9,
                "ttft_s": metric(r, "time_to_first_token"),
                "latency_s": metric(r, "request_latency"),
                "prompt_tokens": PROMPT_TOKENS,
                "output_tokens": output_length(r, stddev),
                "error": r.get("error"),
            }
        )
    measured = [x for x in requests if x["phase"] == "profiling"]
    ttfts = np.array([x["ttft_s"] for x in measured if x["ttft_s"] is not None])
    return {
        "workload": workload_name(concurrency, stddev),
        "client": "aiperf",
        "tag": tag,
        "params": {
            "closed_loop_concurrency": concurrency,
            "requests": count,
            "warmup_requests": warmup,
            "prompt_tokens": PROMPT_TOKENS,
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_stddev": stddev,
        },
        "command": cmd,
        "client_rc": proc.returncode if server.proc is not None else None,
        "client_wall_s": time.time() - started,
        "loadavg_start": load0,
        "loadavg_end": Path("/proc/loadavg").read_text().strip(),
        "summary": {f"ttft_p{q}_ms": float(np.percentile(ttfts, q) * 1e3) for q in (50, 90, 99)},
        "requests": requests,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tag", default="run3")
    parser.add_argument("--port", type=int, default=8013)
    parser.add_argument("--reparse", action="store_true", help="rebuild the JSON from the last run's artifacts")
    parser.add_argument("--output-stddev", type=float, default=0.0, help="aiperf --output-tokens-stddev")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCIES)))
    args = parser.parse_args()
    prepare_model()
    rng = np.random.default_rng(2026)
    server = Server(args.port, RAW / f"server-{args.tag}.log", cpus=SERVER_CPUS)
    try:
        if not args.reparse:
            server.start()
            if DEVICE_CORE:
                server.warm_shapes()
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            result = run(server, concurrency, args.tag, rng, args.output_stddev)
            folder = HERE / "serve_runs" / f"{result['workload']}-aiperf"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{args.tag}.json").write_text(json.dumps(result, indent=1) + "\n")
            print(f"c={concurrency}: {result['summary']} rc {result['client_rc']}", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
