"""Python GC pauses in the real vLLM server's processes while it serves (the open-loop P99 question).

    TTFTSIM_SERVE_LAYOUT=device-core .venv/bin/python benchmarks/vllm_cpu/gc_pauses.py --capacity 21.4 \
        [--tag gc1] [--out benchmarks/vllm_cpu/gc_pauses-device-core.json]

A collection of the oldest generation stops a Python process for as long as it walks the tracked objects; if
the API server or the engine core paused so for 10-20 ms now and then, every request arriving meanwhile would
wait, and the measured TTFT tail would sit above a model without pauses (docs/accuracy.md, Limits). This
measures it instead of assuming it: a sitecustomize module, put in front of the server's PYTHONPATH through
serve_common.py's TTFTSIM_SERVER_PYTHONPATH (the clients' left as they are; nothing else changed), registers a
gc.callbacks hook in every Python process the server starts and logs each collection's generation and
duration. serve_bench.py then runs its Poisson workloads (1 req/s and 70 % of --capacity, vllm bench serve
and GuideLLM); the summary counts the collections of each process (the API server, the engine core it
spawns, the worker the engine core spawns) from the first workload's start to the end, apart from the
start-up ones (vLLM collects and freezes the start-up heap once it is ready: vllm/utils/gc_utils.py
freeze_gc_heap), with the requests served and the seconds from the first workload's start to the end. The
runs' per-request files are left in serve_runs/ under --tag (ordinary runs, measured with the hook on; not
part of the comparisons, not committed).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROBE = """
import gc, os, time
_log = os.environ["TTFTSIM_GC_LOG"]
_state = {"t0": 0.0, "pid": None, "f": None}
def _cb(phase, info):
    if phase == "start":
        _state["t0"] = time.perf_counter()
        return
    took = time.perf_counter() - _state["t0"]
    if _state["pid"] != os.getpid():
        _state["pid"] = os.getpid()
        _state["f"] = open(os.path.join(_log, f"{os.getpid()}.log"), "a", buffering=1)
        cmd = open("/proc/self/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace")[:300]
        _state["f"].write(f"# ppid={os.getppid()} cmd={cmd}\\n")
    _state["f"].write(f"{time.time():.6f} {info.get('generation')} {took * 1e3:.4f}\\n")
gc.callbacks.append(_cb)
"""
STAMP = re.compile(r"^\[(\d\d):(\d\d):(\d\d)\] ")


def read_logs(folder: Path) -> dict[int, dict[str, Any]]:
    """pid -> its parent pid, command line and collections [(epoch s, generation, ms)]."""
    processes = {}
    for path in folder.glob("*.log"):
        lines = path.read_text().splitlines()
        head = re.match(r"# ppid=(\d+) cmd=(.*)", lines[0]) if lines else None
        if head is None:
            continue
        rows = [line.split() for line in lines[1:] if not line.startswith("#")]  # a re-opened log repeats its head
        events = [(float(row[0]), int(row[1]), float(row[2])) for row in rows if len(row) == 3]
        processes[int(path.stem)] = {"ppid": int(head.group(1)), "cmd": head.group(2), "events": events}
    return processes


def roles(processes: dict[int, dict[str, Any]]) -> dict[str, int]:
    """The API server (its command), the engine core (its child) and the worker (the engine core's child)."""
    found: dict[str, int] = {}
    for pid, p in processes.items():
        if "vllm.entrypoints.openai.api_server" in p["cmd"]:
            found["api_server"] = pid
    for role, parent in (("engine_core", "api_server"), ("worker", "engine_core")):
        children = [pid for pid, p in processes.items() if parent in found and p["ppid"] == found[parent]]
        children = [pid for pid in children if "resource_tracker" not in processes[pid]["cmd"]]
        if children:
            found[role] = min(children)
    return found


def summary(processes: dict[int, dict[str, Any]], start_s: float) -> dict[str, Any]:
    out = {}
    for role, pid in roles(processes).items():
        events = [e for e in processes[pid]["events"] if e[0] >= start_s]
        span = max((e[0] for e in events), default=start_s) - start_s
        out[role] = {
            "collections_by_generation": {g: sum(1 for e in events if e[1] == g) for g in (0, 1, 2)},
            "longest_ms": max((e[2] for e in events), default=0.0),
            "total_ms": sum(e[2] for e in events),
            "last_collection_after_s": span,
            "startup_gen2_longest_ms": max(
                (e[2] for e in processes[pid]["events"] if e[0] < start_s and e[1] == 2), default=0.0
            ),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", default="gc1")
    ap.add_argument("--capacity", type=float, required=True, help="req/s (serve_bench.py's capacity probe)")
    ap.add_argument("--out", type=Path, default=HERE / "gc_pauses-device-core.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ttftsim-gc-") as tmp:
        probe, logs = Path(tmp) / "probe", Path(tmp) / "logs"
        probe.mkdir()
        logs.mkdir()
        (probe / "sitecustomize.py").write_text(PROBE)
        env = {**os.environ, "TTFTSIM_SERVER_PYTHONPATH": str(probe), "TTFTSIM_GC_LOG": str(logs)}
        command = [
            sys.executable,
            str(HERE / "serve_bench.py"),
            "--tag",
            args.tag,
            "--only",
            "poisson-low,poisson-high",
        ]
        before = dt.datetime.now()
        run = subprocess.run([*command, "--capacity", str(args.capacity)], env=env, capture_output=True, text=True)
        ended = dt.datetime.now()
        print(run.stdout[-3000:])
        if run.returncode:
            print(run.stderr[-3000:], file=sys.stderr)
            return run.returncode
        first = next((m for m in map(STAMP.match, run.stdout.splitlines()) if m), None)
        if first is None:
            print("serve_bench.py printed no workload start", file=sys.stderr)
            return 1
        start = before.replace(hour=int(first.group(1)), minute=int(first.group(2)), second=int(first.group(3)))
        if start < before.replace(microsecond=0):  # the first workload started after midnight
            start += dt.timedelta(days=1)
        result = {
            "tag": args.tag,
            "workloads": "serve_bench.py poisson-low (vllm bench, GuideLLM) and poisson-high (vllm bench)",
            "requests": sum(int(n) for n in re.findall(r" n=(\d+) ", run.stdout)),
            "serving_s": (ended - start).total_seconds(),
            "from": first.group(0).strip(),
            "processes": summary(read_logs(logs), start.timestamp()),
        }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["processes"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
