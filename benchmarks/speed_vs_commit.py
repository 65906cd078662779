"""Engine speed against another checkout, measured in the same run: interleaved, one core, medians.

    git worktree add /tmp/base b697528                 # the commit to compare with (here: before issue #16)
    python3 -m venv /tmp/base/.venv && /tmp/base/.venv/bin/pip install -e /tmp/base
    python benchmarks/speed_vs_commit.py /tmp/base [--repeats 9]

Workloads a and b of engine_speed.py (a: 10 minutes at 20 req/s on H100; b: 100,000 requests of 512/128
tokens on A100). Each run is a fresh process pinned to CPU 0 with its checkout's own virtual environment
(compiled engine), alternating which checkout goes first. Prints each run's seconds (simulate() alone,
and the whole process: start-up, imports and configuration included), the medians and their ratio
this / other, and the mean TTFT of each (the same numbers when the change keeps results). Run it with
nothing else on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_speed import SCENARIOS

ROOT = Path(__file__).resolve().parents[1]
PIN = ["taskset", "-c", "0"] if shutil.which("taskset") else []
CHILD = """
import json, sys, time
from ttftsim.config.scenario import Scenario
from ttftsim.simulate import simulate
scenario = Scenario.model_validate(json.loads(sys.argv[1]))
started = time.perf_counter()
result = simulate(scenario)
print(json.dumps({"sim_s": time.perf_counter() - started, "requests": len(result.requests),
                  "ttft_mean_s": float(result.requests.ttft_s.mean())}))
"""


def run(root: Path, scenario: dict[str, object]) -> dict[str, float]:
    started = time.perf_counter()
    python = str(root / ".venv" / "bin" / "python")
    env = {**os.environ, "TTFTSIM_PURE_PYTHON": ""}
    out = subprocess.run(
        [*PIN, python, "-W", "ignore", "-c", CHILD, json.dumps(scenario)],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    figures["process_s"] = time.perf_counter() - started
    return figures


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    other = Path(sys.argv[1]).resolve()
    repeats = int(sys.argv[sys.argv.index("--repeats") + 1]) if "--repeats" in sys.argv else 9
    for name in ("a", "b"):
        runs: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
        for i in range(repeats):
            order = (("this", ROOT), ("other", other)) if i % 2 == 0 else (("other", other), ("this", ROOT))
            for who, root in order:
                runs[who].append(run(root, SCENARIOS[name]))
        for who, figures in runs.items():
            sims = " ".join(f"{f['sim_s']:.3f}" for f in figures)
            print(
                f"{name} {who}: {figures[0]['requests']} requests, mean TTFT {figures[0]['ttft_mean_s']:.6f} s; "
                f"simulate() s: {sims}"
            )
        for key in ("sim_s", "process_s"):
            this = statistics.median(f[key] for f in runs["this"])
            base = statistics.median(f[key] for f in runs["other"])
            print(f"{name} {key}: this {this:.3f}  other {base:.3f}  this/other {this / base:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
