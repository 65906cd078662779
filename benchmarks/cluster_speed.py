"""Cluster simulation speed (issue "Cluster", must-show): one hour, 8 replicas, 50 req/s (about 180,000
requests), Llama-3.1-8B on H100s behind a least-outstanding router; target < 60 s on one core, whole
process. The baseline measured in the same run is one replica of the engine alone at 50/8 req/s for the
same hour (the cluster's per-replica work), so the ratio shows what the cluster layer costs on top.

    python benchmarks/cluster_speed.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = {
    "type": "synthetic",
    "arrivals": {"type": "poisson", "rate": 50},
    "prompt_tokens": {"type": "lognormal", "mean": 1000, "std": 800, "high": 8000},
    "output_tokens": {"type": "lognormal", "mean": 200, "std": 150, "high": 1000},
    "duration_s": 3600,
}
CLUSTER = {
    "name": "cluster-speed",
    "model": "Llama-3.1-8B",
    "hardware": "H100-SXM5-80GB",
    "seed": 1,
    "workload": WORKLOAD,
    "cluster": {
        "node_pools": [{"name": "h100", "hardware": "H100-SXM5-80GB", "gpus_per_node": 8, "max_nodes": 1}],
        "replicas": 8,
        "router": {"type": "least_outstanding"},
    },
}
SINGLE = {
    **{k: v for k, v in CLUSTER.items() if k != "cluster"},
    "workload": {**WORKLOAD, "arrivals": {"type": "poisson", "rate": 50 / 8}},
}

CHILD = """
import json, sys, time
from ttftsim.config.scenario import Scenario
from ttftsim.simulate import simulate
t0 = time.perf_counter()
result = simulate(Scenario.model_validate(json.loads(sys.argv[1])))
print(json.dumps({"requests": len(result.requests), "sim_s": time.perf_counter() - t0}))
"""


def run(scenario: dict[str, object]) -> dict[str, float]:
    pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
    started = time.perf_counter()
    out = subprocess.run(
        [*pin, sys.executable, "-c", CHILD, json.dumps(scenario)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    figures: dict[str, float] = json.loads(out.stdout)
    figures["process_s"] = time.perf_counter() - started
    return figures


def main() -> int:
    cluster, single = run(CLUSTER), run(SINGLE)
    print(f"{'run':<34}{'requests':>10}{'process s':>11}{'req/s':>10}")
    for label, fig in (("8-replica cluster, 1 h, 50 req/s", cluster), ("1 replica, 1 h, 6.25 req/s", single)):
        print(
            f"{label:<34}{fig['requests']:>10,.0f}{fig['process_s']:>11.1f}{fig['requests'] / fig['process_s']:>10,.0f}"
        )
    per_replica = cluster["process_s"] / (8 * single["process_s"])
    print(
        f"cluster time / (8 x one replica's) = {per_replica:.2f}; target: cluster < 60 s -> "
        f"{'met' if cluster['process_s'] < 60 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
