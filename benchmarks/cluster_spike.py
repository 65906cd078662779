"""The spike example four ways: HPA on the waiting queue or on TTFT P99, with and without a warm pool.

Prints, per variant, TTFT P99 per minute (requests whose first token came in that minute), SLO-violation
minutes (minutes by arrival whose P99 exceeds the SLO), replicas over time and the cost.

    python benchmarks/cluster_spike.py [--json OUT]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ttftsim.simulate import load_scenario, simulate  # noqa: E402

VARIANTS = {
    "queue, no warm pool": ({"name": "num_requests_waiting", "target": 5}, 0),
    "queue, warm pool 2": ({"name": "num_requests_waiting", "target": 5}, 2),
    "TTFT P99, no warm pool": ({"name": "ttft_p99_s", "target": 0.5}, 0),
    "TTFT P99, warm pool 2": ({"name": "ttft_p99_s", "target": 0.5}, 2),
}


def main() -> int:
    base = load_scenario(ROOT / "examples/cluster-spike.yaml")
    assert base.cluster is not None and base.cluster.autoscaling is not None
    report = {}
    for label, (metric, warm) in VARIANTS.items():
        autoscaling = base.cluster.autoscaling.model_copy(
            update={"metrics": [type(base.cluster.autoscaling.metrics[0]).model_validate(metric)]}
        )
        cluster = base.cluster.model_copy(update={"autoscaling": autoscaling, "warm_pool": warm})
        result = simulate(base.model_copy(update={"cluster": cluster}), ROOT / "examples")
        summary = result.summary()
        assert summary.cluster is not None
        series = result.time_series()
        p99 = [None if v != v else round(float(v), 2) for v in series["ttft_p99_s"]]
        ready = [int(v) if v == v else None for v in series["pods_ready"]]
        report[label] = {
            "slo_violation_minutes": summary.cluster.slo_violation_minutes,
            "ttft_p99_s": summary.ttft_s.p99,
            "cost_usd": summary.cluster.cost_usd,
            "cold_starts": summary.cluster.cold_start_s.count,
            "p99_per_minute_s": p99,
            "ready_replicas_per_minute": ready,
        }
        print(
            f"== {label}: SLO-violation minutes {report[label]['slo_violation_minutes']:.0f}, "
            f"run P99 {summary.ttft_s.p99:.2f} s, cost ${summary.cluster.cost_usd:.2f}"
        )
        print("   P99 TTFT per minute (s):", " ".join("-" if v is None else f"{v:g}" for v in p99))
        print("   ready replicas per minute:", " ".join("-" if v is None else str(v) for v in ready))
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
