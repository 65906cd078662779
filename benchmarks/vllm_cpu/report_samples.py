"""Small real reports of each benchmark tool against the real vLLM CPU server, for tests/data/reports/.

    .venv-vllm-cpu/bin/python benchmarks/vllm_cpu/report_samples.py [--port 8021] [--prom-port 9091]

Starts the server as serve_bench.py does (serve_common.Server, not pinned) and a Prometheus (Debian's
`prometheus` package, `apt-get install prometheus`) scraping its /metrics every second, then runs, a few
dozen short requests each: `vllm bench serve` open loop (Poisson 2 req/s, --save-detailed) and closed loop
(--max-concurrency 4, summary only), GuideLLM 0.8.1 concurrent 2 and 4 streams, aiperf 0.13 concurrency 4
with a warm-up. It keeps /metrics before and after the open-loop run and a Prometheus range query over it.
Every file is written as the tool wrote it, into tests/data/reports/<tool>-<version>/ (the commands are in
commands.json there); the server and Prometheus are stopped in a finally block.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aiperf_closed import AIPERF
from aiperf_closed import write_prompts as write_aiperf_prompts
from serve_bench import guidellm, vllm_bench, write_prompts
from serve_common import MODEL_DIR, ROOT, WORK, Server, http_get, prepare_model, run_logged

REPORTS = ROOT / "tests" / "data" / "reports"
SCRATCH = WORK / "report-samples"
VERSIONS = {"vllm": "vllm-bench-0.32.0", "guidellm": "guidellm-0.8.1", "aiperf": "aiperf-0.13.0"}
PROM_SERIES = (
    '{__name__=~"vllm:(time_to_first_token_seconds|inter_token_latency_seconds|'
    "request_time_per_output_token_seconds|e2e_request_latency_seconds|request_queue_time_seconds|"
    "request_prefill_time_seconds|request_decode_time_seconds)_(bucket|sum|count)|"
    'vllm:(num_requests_running|num_requests_waiting|kv_cache_usage_perc|request_success_total)"}'
)


class Prometheus:
    """Debian's prometheus scraping the server every second, storage in a temporary folder; always stopped."""

    def __init__(self, target: str, port: int) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ttftsim-prom-"))
        self.base = f"http://127.0.0.1:{port}"
        config = self.folder / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"scrape_configs:\n  - job_name: vllm\n    static_configs: [{{targets: ['{target}']}}]\n"
        )
        self.command = [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={self.folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.folder / "prometheus.log", "wb")  # noqa: SIM115 (lives as long as the process)
        self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        for _ in range(60):
            try:
                http_get(self.base + "/-/ready", timeout=2)
                return
            except Exception:
                time.sleep(1.0)
        raise TimeoutError("prometheus not ready")

    def query_range(self, query: str, start: float, end: float, step: float) -> str:
        args = urllib.parse.urlencode({"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step})
        return http_get(f"{self.base}/api/v1/query_range?{args}", timeout=60)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(os.getpgid(self.proc.pid), signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(os.getpgid(self.proc.pid), signal.SIGKILL)
                self.proc.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)


def run(cmd: list[str], name: str, timeout_s: float, commands: dict[str, Any]) -> None:
    status = run_logged(cmd, timeout_s, SCRATCH / f"{name}.log")
    commands[name] = {"command": cmd, **status}
    print(f"{name}: rc {status['rc']} in {status['wall_s']:.1f} s", flush=True)


def without(cmd: list[str], flag: str) -> list[str]:
    return [arg for arg in cmd if arg != flag]


def vllm_runs(server: Server, prom: Prometheus, commands: dict[str, Any]) -> None:
    out = REPORTS / VERSIONS["vllm"]
    prom_out = REPORTS / "prometheus-2.42"
    out.mkdir(parents=True, exist_ok=True)
    prom_out.mkdir(parents=True, exist_ok=True)
    data = SCRATCH / "vllm-poisson.jsonl"
    write_prompts(data, 101, 30, 32, 128, 16)
    cmd, raw = vllm_bench(server, "vllm-poisson", data, 30, 2.0, [])
    cmd += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99"]
    cmd[cmd.index("--result-dir") + 1] = str(SCRATCH)
    (prom_out / "metrics-before.txt").write_text(server.metrics())
    started = time.time()
    run(cmd, "vllm-poisson", 300, commands)
    ended = time.time()
    time.sleep(2.5)  # two more scrapes, so the range query sees the last requests
    (prom_out / "metrics-after.txt").write_text(server.metrics())
    shutil.copy(SCRATCH / raw.name, out / "poisson-2rps-detailed.json")
    body = prom.query_range(PROM_SERIES, math.floor(started) - 2, math.ceil(ended) + 2, 2)
    (prom_out / "query_range.json").write_text(body)
    commands["prometheus"] = {"query": PROM_SERIES, "start": started, "end": ended, "step_s": 2}

    data = SCRATCH / "vllm-closed.jsonl"
    write_prompts(data, 102, 24, 32, 128, 16)
    cmd, raw = vllm_bench(server, "vllm-closed", data, 24, math.inf, ["--max-concurrency", "4"])
    cmd = without(cmd, "--save-detailed")
    cmd[cmd.index("--result-dir") + 1] = str(SCRATCH)
    run(cmd, "vllm-closed", 300, commands)
    shutil.copy(SCRATCH / raw.name, out / "concurrency-4-summary.json")


def guidellm_run(server: Server, commands: dict[str, Any]) -> None:
    out = REPORTS / VERSIONS["guidellm"]
    out.mkdir(parents=True, exist_ok=True)
    data = SCRATCH / "guidellm.jsonl"
    write_prompts(data, 103, 40, 32, 128, 16)
    cmd, _ = guidellm(server, "guidellm", "kind=concurrent,streams=2", f"kind=json_file,path={data}", 12)
    cmd[cmd.index("--output") + 1] = f"kind=json,path={SCRATCH / 'benchmarks.json'}"
    cmd += ["--override", "profile.streams", "2,4"]
    run(cmd, "guidellm", 400, commands)
    shutil.copy(SCRATCH / "benchmarks.json", out / "benchmarks.json")


def aiperf_run(server: Server, commands: dict[str, Any]) -> None:
    out = REPORTS / VERSIONS["aiperf"]
    out.mkdir(parents=True, exist_ok=True)
    prompts = SCRATCH / "aiperf.jsonl"
    write_aiperf_prompts(prompts, 28, np.random.default_rng(104))
    artifacts = SCRATCH / "aiperf-artifacts"
    shutil.rmtree(artifacts, ignore_errors=True)
    cmd = [
        str(AIPERF), "profile",
        "--model", str(MODEL_DIR), "--tokenizer", str(MODEL_DIR),
        "--url", server.base, "--endpoint-type", "completions", "--streaming",
        "--input-file", str(prompts), "--custom-dataset-type", "single_turn",
        "--output-tokens-mean", "32", "--output-tokens-stddev", "0",
        "--extra-inputs", "ignore_eos:true",
        "--concurrency", "4", "--request-count", "24", "--warmup-request-count", "4",
        "--artifact-dir", str(artifacts), "--ui", "none",
    ]  # fmt: skip
    run(cmd, "aiperf", 600, commands)
    for name in ("profile_export_aiperf.json", "profile_export.jsonl"):
        shutil.copy(next(artifacts.rglob(name)), out / name)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8021)
    parser.add_argument("--prom-port", type=int, default=9091)
    parser.add_argument("--only", default="vllm,guidellm,aiperf")
    args = parser.parse_args()
    prepare_model()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    server = Server(args.port, SCRATCH / "server.log", cpus=None)
    prom = Prometheus(f"127.0.0.1:{args.port}", args.prom_port)
    commands: dict[str, Any] = {"server": server.command()}
    only = set(args.only.split(","))
    try:
        print(f"server up in {server.start():.0f} s", flush=True)
        prom.start()
        if "vllm" in only:
            vllm_runs(server, prom, commands)
        if "guidellm" in only:
            guidellm_run(server, commands)
        if "aiperf" in only:
            aiperf_run(server, commands)
    finally:
        prom.stop()
        server.stop()
        (SCRATCH / "commands.json").write_text(json.dumps(commands, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
