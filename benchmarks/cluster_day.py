"""A fleet's day (issue "A fleet's day in a minute"): 24 hours of diurnal traffic (Poisson with a
piecewise-linear rate, mean 50 req/s, peak 3x trough: 25 to 75 req/s, trough at 04:00, peak at 16:00),
ShareGPT-like lengths (lognormal prompts mean 230, outputs mean 200 tokens), Llama-3.1-8B on L40S nodes of
8 GPUs provisioned by Karpenter, the HPA between 4 and 32 replicas on TTFT P99 (0.5 s), a warm pool of 2,
least-outstanding routing. About 4.3 million requests. Target: <= 60 s whole process on one core.

L40S, not H100: four H100 replicas serve the peak's 75 req/s at a P99 TTFT of 65 ms, so on H100 the HPA never
leaves its minimum and no node is ever provisioned; on L40S the fleet follows the traffic (4 to 6 replicas
ready over the day, a second node provisioned when the warm pool is spent; the HPA asks for up to 9 when P99 TTFT
spikes; tests/cluster/test_day_reference.py replays such a stretch, from 13:00 with a fresh fleet).

Each run is `ttftsim simulate FILE --json` in a fresh process pinned to one core, timed whole (start to
exit, imports included); peak RSS is the child's (getrusage). The baseline, measured in the same run, is
the same command on the first --baseline-hours of the day with the engine as plain Python
(TTFTSIM_PURE_PYTHON=1: the mypyc-compiled modules loaded from source), scaled per request.

    python benchmarks/cluster_day.py [--hours 24] [--baseline-hours 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MEAN_RATE, PEAK_OVER_TROUGH = 50.0, 3.0
# `ttftsim simulate` as the console script runs it, then the process's own peak RSS (KiB) on stderr
CHILD = """
import resource, sys
from ttftsim.cli import main
sys.argv = ["ttftsim", *sys.argv[1:]]
try:
    main()
finally:
    sys.stderr.write(f"\\nmaxrss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n")
"""


def diurnal_points(hours: float, start_hour: float = 0.0) -> list[list[float]]:
    """Hourly (time s, rate) points of mean * (1 + a sin(2 pi (h - 10) / 24)), a = (3 - 1) / (3 + 1): trough
    25 req/s at 04:00, peak 75 at 16:00, mean 50 over a whole day; time 0 is `start_hour` o'clock."""
    amplitude = (PEAK_OVER_TROUGH - 1) / (PEAK_OVER_TROUGH + 1)
    steps = math.ceil(hours)
    return [
        [h * 3600.0, MEAN_RATE * (1 + amplitude * math.sin(2 * math.pi * (start_hour + h - 10) / 24))]
        for h in range(steps + 1)
    ]


def scenario(hours: float, start_hour: float = 0.0) -> dict[str, object]:
    """The day's first `hours`, or `hours` from `start_hour` o'clock with the fleet at its minimum (a test replays
    a stretch where the fleet scales)."""
    return {
        "name": f"cluster-day-{hours:g}h" + (f"-from-{start_hour:g}h" if start_hour else ""),
        "model": "Llama-3.1-8B",
        "hardware": "L40S-48GB",
        "engine": {"vllm_version": "0.15.1"},
        "seed": 11,
        "metrics_window_s": 60,
        "slo": {"ttft_p99_s": 1.0},
        "workload": {
            "type": "synthetic",
            "arrivals": {"type": "rate_curve", "points": diurnal_points(hours, start_hour)},
            "prompt_tokens": {"type": "lognormal", "mean": 230, "std": 300, "high": 4000},
            "output_tokens": {"type": "lognormal", "mean": 200, "std": 220, "high": 2000},
            "duration_s": hours * 3600.0,
        },
        "cluster": {
            "node_pools": [
                {
                    "name": "l40s",
                    "hardware": "L40S-48GB",
                    "gpus_per_node": 8,
                    "initial_nodes": 1,
                    "max_nodes": 5,
                    "provisioner": "karpenter",
                    "provision_s": 180,
                }
            ],
            "pod": {"weights_source": "network_volume"},
            "autoscaling": {"min_replicas": 4, "max_replicas": 32, "metrics": [{"name": "ttft_p99_s", "target": 0.5}]},
            "warm_pool": 2,
            "router": {"type": "least_outstanding"},
        },
    }


def run(hours: float, folder: Path, pure_python: bool) -> dict[str, float]:
    path = folder / f"day-{hours:g}.yaml"
    path.write_text(yaml.safe_dump(scenario(hours)), encoding="utf-8")
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    env = {**os.environ, "TTFTSIM_PURE_PYTHON": "1"} if pure_python else dict(os.environ)
    env.pop("TTFTSIM_PURE_PYTHON", None) if not pure_python else None
    started = time.perf_counter()
    out = subprocess.run(
        [
            *pin,
            sys.executable,
            "-W",
            "ignore",
            "-c",
            CHILD,
            "simulate",
            str(path),
            "--json",
            "--max-requests",
            "10000000",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - started
    if out.returncode not in (0, 1):  # 1: the SLO was missed, a result all the same
        raise SystemExit(f"simulate failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    summary = json.loads(out.stdout)
    peak_kib = float(out.stderr.strip().splitlines()[-1].split("=")[1])
    return {
        "requests": float(summary["requests"]["arrived"]),
        "process_s": wall,
        "peak_rss_mib": peak_kib / 1024,
        "replicas_max": float(summary["cluster"]["max_ready_replicas"]),
        "cost_usd": float(summary["cluster"]["cost_usd"]),
        "violation_minutes": float(  # 0 minutes is a figure, None (no SLO target) is not
            v if (v := summary["cluster"].get("slo_violation_minutes")) is not None else float("nan")
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--baseline-hours", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        day = run(args.hours, folder, pure_python=False)
        base = run(args.baseline_hours, folder, pure_python=True)
    print(f"{'run':<44}{'requests':>11}{'process s':>11}{'req/s':>9}{'peak RSS MiB':>14}")
    for label, fig in (
        (f"day ({args.hours:g} h), compiled engine", day),
        (f"baseline: first {args.baseline_hours:g} h, plain Python", base),
    ):
        rate = fig["requests"] / fig["process_s"]
        print(
            f"{label:<44}{fig['requests']:>11,.0f}{fig['process_s']:>11.1f}{rate:>9,.0f}{fig['peak_rss_mib']:>14,.0f}"
        )
    ratio = (day["requests"] / day["process_s"]) / (base["requests"] / base["process_s"])
    print(f"speed-up (requests per second, day / baseline) = {ratio:.2f}x")
    print(
        f"day: at most {day['replicas_max']:.0f} replicas ready, cost ${day['cost_usd']:,.0f}, "
        f"SLO-violation minutes {day['violation_minutes']:.0f}"
    )
    if args.hours >= 24:
        print(
            f"target <= 60 s for the day: {'met' if day['process_s'] <= 60 else 'NOT met'} ({day['process_s']:.0f} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
