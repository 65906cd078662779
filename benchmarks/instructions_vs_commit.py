"""Engine work against another checkout, counted in instructions: deterministic where timing is not.

    git worktree add /tmp/base b697528                 # the commit to compare with
    python3 -m venv /tmp/base/.venv && /tmp/base/.venv/bin/pip install -e /tmp/base
    python benchmarks/instructions_vs_commit.py /tmp/base [--requests 20000]

Timing on a shared two-core VM moves by 20% between identical runs (benchmarks/speed_vs_commit.py needs many
repeats to see 5%). Valgrind's callgrind counts the instructions a process executes instead: the same
inputs give the same count to a fraction of a per mille, whatever else runs on the machine, so the two
checkouts can even be counted side by side. Each checkout runs workload b of engine_speed.py (512/128-token
requests on A100, compiled engine) twice, at --requests and at a tenth of it; the difference of the two
counts is what simulating the extra requests costs, without start-up, imports and configuration (those are
printed apart: the small run's count). About 50x slower than a plain run: 20,000 requests take ~3 minutes.
Needs `valgrind` (Debian: apt install valgrind).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_speed import SCENARIOS

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys
from ttftsim.config.scenario import Scenario
from ttftsim.simulate import simulate
result = simulate(Scenario.model_validate(json.loads(sys.argv[1])))
print(json.dumps({"requests": len(result.requests), "ttft_mean_s": float(result.requests.ttft_s.mean())}))
"""


def count(root: Path, requests: int) -> tuple[int, dict[str, float]]:
    """Instructions of one whole process on `root`'s checkout, and what it printed."""
    scenario = json.loads(json.dumps(SCENARIOS["b"]))
    scenario["workload"]["num_requests"] = requests
    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={folder}/callgrind.out",
                str(root / ".venv" / "bin" / "python"),
                "-W",
                "ignore",
                "-c",
                CHILD,
                json.dumps(scenario),
            ],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "TTFTSIM_PURE_PYTHON": ""},
        )
    collected = re.search(r"Collected : (\d+)", out.stderr)
    if collected is None:
        raise SystemExit(f"callgrind printed no count for {root}:\n{out.stderr[-2000:]}")
    return int(collected.group(1)), json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    other = Path(sys.argv[1]).resolve()
    requests = int(sys.argv[sys.argv.index("--requests") + 1]) if "--requests" in sys.argv else 20_000
    small = requests // 10
    jobs = [(root, n) for root in (ROOT, other) for n in (small, requests)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: count(*job), jobs), strict=True))
    for who, root in (("this", ROOT), ("other", other)):
        start, _ = counts[(root, small)]
        total, printed = counts[(root, requests)]
        print(
            f"{who}: {root}: {printed['requests']} requests, mean TTFT {printed['ttft_mean_s']:.6f} s; "
            f"instructions: {small} requests {start / 1e9:.3f} G, {requests} requests {total / 1e9:.3f} G"
        )
    this_sim = counts[(ROOT, requests)][0] - counts[(ROOT, small)][0]
    other_sim = counts[(other, requests)][0] - counts[(other, small)][0]
    print(
        f"simulating {requests - small} requests: this {this_sim / 1e9:.3f} G, other {other_sim / 1e9:.3f} G "
        f"instructions, this/other {this_sim / other_sim:.3f}"
    )
    print(f"start-up and {small} requests: this/other {counts[(ROOT, small)][0] / counts[(other, small)][0]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
