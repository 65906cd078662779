"""Engine simulation speed: simulated requests per wall-clock second, whole process on one core.

Workloads (issue "Engine simulator", must-show speed):
  a) 10 minutes at 20 req/s, ~550-token prompts, 250-token outputs, Llama-2-7B on H100 (target < 1 s);
  b) 100,000 requests of 512/128 tokens at 10 req/s, Llama-2-7B TP1 on A100 (Vidur: 741 req/s);
  c) the Azure 2023 conversation trace, Llama-2-7B TP1 on A100 (Vidur: 383 req/s).
Each runs in a fresh process pinned to one core (taskset): as users run it, `ttftsim simulate FILE --json`,
timed whole (start to exit, imports included); and through the library, timed inside (simulation only).
Baselines measured in the same run: the same command with the engine as plain Python
(TTFTSIM_PURE_PYTHON=1: the mypyc-compiled modules loaded from source), and the library stepping every
iteration (closed-form decode runs and the decode cohort off; "speed-up" compares library processes).
Vidur's rates are from ../shared/reference/peer-speed.md.

    python benchmarks/engine_speed.py [--quick]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VIDUR = {"a": None, "b": 741.0, "c": 383.0}

SCENARIOS = {
    "a": {
        "model": "Llama-2-7b-hf",
        "hardware": "H100-SXM5-80GB",
        "workload": {
            "type": "synthetic",
            "arrivals": {"type": "poisson", "rate": 20},
            "prompt_tokens": {"type": "uniform", "low": 500, "high": 600},
            "output_tokens": {"type": "fixed", "value": 250},
            "duration_s": 600,
        },
    },
    "b": {
        "model": "Llama-2-7b-hf",
        "hardware": "A100-SXM4-80GB",
        "workload": {
            "type": "synthetic",
            "arrivals": {"type": "poisson", "rate": 10},
            "prompt_tokens": {"type": "fixed", "value": 512},
            "output_tokens": {"type": "fixed", "value": 128},
            "num_requests": 100_000,
        },
    },
    "c": {
        "model": "Llama-2-7b-hf",
        "hardware": "A100-SXM4-80GB",
        "workload": {
            "type": "trace",
            "format": "azure",
            "path": str(ROOT.parent / "shared/data/traces/azure2023/AzureLLMInferenceTrace_conv.csv"),
        },
    },
}

PIN = ["taskset", "-c", "0"] if shutil.which("taskset") else []  # one core

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from ttftsim.config.scenario import Scenario
from ttftsim.simulate import simulate
scenario = Scenario.model_validate(json.loads(sys.argv[1]))
t1 = time.perf_counter()
result = simulate(scenario, closed_form_decode=sys.argv[2] == "1")
t2 = time.perf_counter()
from ttftsim._native import is_compiled
print(json.dumps({"requests": len(result.requests), "sim_s": t2 - t1, "import_s": t1 - t0, "compiled": is_compiled(),
                  "finished": int((result.requests.status == "finished").sum()), "sim_end_s": result.sim_end_s}))
"""


def run_child(scenario: dict[str, object], closed_form: bool, pure: bool = False) -> dict[str, float]:
    env = {**os.environ, "TTFTSIM_PURE_PYTHON": "1" if pure else ""}
    started = time.perf_counter()
    out = subprocess.run(
        [*PIN, sys.executable, "-W", "ignore", "-c", CHILD, json.dumps(scenario), "1" if closed_form else "0"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=env,
    )
    figures: dict[str, float] = json.loads(out.stdout)
    figures["process_s"] = time.perf_counter() - started
    return figures


def run_cli(scenario: dict[str, object], pure: bool = False) -> dict[str, float]:
    """`ttftsim simulate FILE --json` in a fresh process: wall seconds and requests simulated."""
    env = {**os.environ, "TTFTSIM_PURE_PYTHON": "1" if pure else ""}
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "scenario.yaml"
        path.write_text(json.dumps(scenario), encoding="utf-8")  # JSON is YAML
        started = time.perf_counter()
        out = subprocess.run(
            [*PIN, str(Path(sys.executable).with_name("ttftsim")), "simulate", str(path), "--json"],
            capture_output=True,
            text=True,
            check=False,
            cwd=ROOT,
            env=env,
        )
        wall = time.perf_counter() - started
    if out.returncode not in (0, 1):  # 1: the scenario's SLO missed, still a result
        raise RuntimeError(out.stderr)
    return {"process_s": wall, "requests": float(json.loads(out.stdout)["requests"]["arrived"])}


def main() -> int:
    quick = "--quick" in sys.argv
    header = (
        f"{'workload':<10}{'requests':>10}{'process s':>11}{'sim s':>9}{'req/s (process)':>17}{'x Vidur':>9}"
        f"{'plain Python':>14}{'stepping':>10}{'speed-up':>10}"
    )
    printed = False
    for name, scenario in SCENARIOS.items():
        if name == "c" and not Path(scenario["workload"]["path"]).exists():  # type: ignore[index]
            print(f"{name:<10} skipped: ../shared absent")
            continue
        if quick:
            scenario = json.loads(json.dumps(scenario))
            scenario["workload"]["num_requests"] = 5000  # type: ignore[index]
        library = run_child(scenario, True)
        if not printed:
            print(f"engine: {'compiled (mypyc)' if library['compiled'] else 'plain Python (not compiled)'}")
            print(header)
            printed = True
        cli, pure = run_cli(scenario), run_cli(scenario, pure=True)
        base = run_child(scenario, False) if name != "b" or quick else None
        rate = cli["requests"] / cli["process_s"]
        speed_up = base["process_s"] / library["process_s"] if base else float("nan")  # same requests
        vidur = VIDUR[name]
        print(
            f"{name:<10}{int(cli['requests']):>10,}{cli['process_s']:>11.2f}{library['sim_s']:>9.2f}{rate:>17,.0f}"
            f"{rate / vidur if vidur else float('nan'):>9.1f}{pure['requests'] / pure['process_s']:>14,.0f}"
            f"{base['requests'] / base['process_s'] if base else float('nan'):>10,.0f}{speed_up:>10.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
