"""Plan speed at scale (issue "A fleet's day in a minute", plans at scale): a search of 1,152 candidates, the
wide example (examples/plans/large.yaml: four GPU types, TP 1/2/4, batch limits, prefix caching) with weight and
KV formats added (bf16 / fp8 each); target <= 5 minutes on 2 cores with the local process pool.

`ttftsim plan FILE --workers N --json --out DIR` runs in a fresh process, timed whole (start to exit, imports
included). The baseline, measured in the same run, is the same plan with one worker (no pool), so the ratio
shows what the second core buys; both must give the same plan.json (checked: the plan is a pure function of the
file and the seed, docs/plan.md).

    python benchmarks/plan_speed.py [--workers 2] [--skip-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def plan_file(folder: Path) -> Path:
    """The large example with weight and KV formats searched too."""
    plan = yaml.safe_load((ROOT / "examples/plans/large.yaml").read_text(encoding="utf-8"))
    plan["name"] = "plan-speed-1152"
    plan["search"]["quantization"] = [None, "fp8"]
    plan["search"]["kv_cache_dtype"] = ["auto", "fp8"]
    path = folder / "plan-speed.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False), encoding="utf-8")
    return path


def run(path: Path, workers: int, out: Path) -> tuple[float, bytes, dict[str, Any]]:
    """Whole-process seconds, plan.json's bytes and the --json result of one plan run."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ttftsim", "plan", str(path), "--workers", str(workers), "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        check=False,
    )
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):  # 1: nothing met the SLOs, a result all the same
        raise SystemExit(f"plan failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return wall, (out / "plan.json").read_bytes(), json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-baseline", action="store_true", help="do not run the one-worker baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        path = plan_file(folder)
        wall, plan, summary = run(path, args.workers, folder / "pool")
        print(f"{summary['candidates']} candidates, {args.workers} workers: {wall:.1f} s whole process (target 300 s)")
        statuses = Counter(str(row["status"]) for row in summary["ranked"])  # how each candidate was settled
        print(f"  candidates: {', '.join(f'{n} {status}' for status, n in sorted(statuses.items()))}")
        print(f"  recommended: {summary['recommendation']}")
        if not args.skip_baseline:
            one_wall, one_plan, _ = run(path, 1, folder / "one")
            print(f"baseline, 1 worker: {one_wall:.1f} s; {args.workers} workers {one_wall / wall:.2f}x faster")
            print(f"  plan.json of the two: {'identical' if one_plan == plan else 'DIFFERENT'}")
            if one_plan != plan:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
