"""Re-record the example summaries in examples/expected/ (tests/test_examples.py compares against them).

    python examples/record.py [NAME ...]

Loud by design: any example that fails to run (a missing ../shared included), or whose summary breaks an
invariant that holds for every correct run (`invariant_problems`), stops the recording with exit 1 and
writes nothing. Every figure that moved is printed with its relative change, so the commit that re-records
can say which mechanism moved which number; a re-record belongs in its own commit, after the change that
explains it.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from ttftsim.simulate import load_scenario, simulate

HERE = Path(__file__).resolve().parent
PERCENTILES = ("p50", "p90", "p99", "p999")


def recorded_summary(path: Path) -> dict[str, Any]:
    """The summary of one example without the wall-clock figures."""
    result = simulate(load_scenario(path), path.parent, source=str(path))
    summary = result.summary().to_json()
    summary.pop("simulation")
    return summary


def invariant_problems(summary: dict[str, Any]) -> list[str]:
    """What is wrong with a summary whatever the model's numbers: requests are conserved, percentiles do
    not decrease, latencies and breakdown parts are not negative, the breakdown does not exceed the mean
    TTFT, and TTFT is below end-to-end latency."""
    problems = []
    requests = summary["requests"]
    ended = sum(requests[k] for k in ("finished", "failed", "aborted", "rejected", "in_flight"))
    if ended != requests["arrived"]:
        problems.append(f"requests: {requests['arrived']} arrived but {ended} are accounted for")
    for metric in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        figures = summary.get(metric) or {}
        values = [figures[p] for p in PERCENTILES if figures.get(p) is not None]
        if any(not math.isfinite(v) or v < 0 for v in values):
            problems.append(f"{metric}: a negative or non-finite percentile {values}")
        if values != sorted(values):
            problems.append(f"{metric}: percentiles decrease {values}")
    breakdown = summary.get("ttft_breakdown_mean_s") or {}
    if any(v < -1e-9 for v in breakdown.values()):
        problems.append(f"ttft_breakdown_mean_s: a negative part {breakdown}")
    ttft, e2e = summary.get("ttft_s") or {}, summary.get("e2e_s") or {}
    if breakdown and ttft.get("mean") is not None and sum(breakdown.values()) > ttft["mean"] * (1 + 1e-6) + 1e-9:
        problems.append(f"ttft_breakdown_mean_s sums to {sum(breakdown.values())} > mean TTFT {ttft['mean']}")
    if ttft.get("mean") is not None and e2e.get("mean") is not None and ttft["mean"] > e2e["mean"]:
        problems.append(f"mean TTFT {ttft['mean']} > mean end-to-end {e2e['mean']}")
    return problems


def moved(old: Any, new: Any, where: str = "") -> list[str]:
    """Every figure that differs between two recordings, with its relative change."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            line for key in sorted(set(old) | set(new)) for line in moved(old.get(key), new.get(key), f"{where}.{key}")
        ]
    if old == new:
        return []
    if isinstance(old, int | float) and isinstance(new, int | float) and old:
        return [f"{where}: {old:.6g} -> {new:.6g} ({(new - old) / abs(old):+.2%})"]
    return [f"{where}: {str(old)[:80]} -> {str(new)[:80]}"]


def main(names: list[str]) -> int:
    paths = [p for p in sorted(HERE.glob("*.yaml")) if not names or p.stem in names]
    recordings = {}
    for path in paths:
        try:
            summary = json.loads(json.dumps(recorded_summary(path)))
        except Exception as exc:
            print(f"error: {path.name} did not run ({exc.__class__.__name__}: {exc}); nothing written", file=sys.stderr)
            return 1
        problems = invariant_problems(summary)
        if problems:
            print(f"error: {path.name}: {'; '.join(problems)}; nothing written", file=sys.stderr)
            return 1
        recordings[path] = summary
    for path, summary in recordings.items():
        out = HERE / "expected" / f"{path.stem}.json"
        old = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
        changes = moved(old, summary)
        out.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"{out.relative_to(HERE.parent)}: {len(changes)} figures moved")
        for line in changes:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
