"""The cluster's books: a time series of pods, nodes and the gateway queue every metrics window, one row
per pod at the end (role, node, lifecycle times, cold-start phase durations), and the bill: node-hours,
GPU-hours and dollars, each node billed from its request to its removal (or the end of the run). Not
modelled: spot prices, per-second billing minimums, storage and network charges.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from ttftsim.cluster.gateway import Gateway
from ttftsim.cluster.lifecycle import PodLifecycle
from ttftsim.cluster.provisioner import Provisioner
from ttftsim.hardware.catalog import load_hardware


class Accounting:
    """Reads the other parts; writes only its own rows."""

    def __init__(
        self,
        env: simpy.Environment,
        window_s: float,
        provisioner: Provisioner,
        lifecycle: PodLifecycle,
        gateway: Gateway,
    ) -> None:
        self.env, self.window_s = env, window_s
        self.provisioner, self.lifecycle, self.gateway = provisioner, lifecycle, gateway
        self.series: list[dict[str, float]] = []
        self.pod_rows: list[dict[str, Any]] = []

    def run(self) -> Generator[simpy.Event, Any, None]:
        """Sample every window_s from time 0: serving pods by state, ready warm pods, nodes, the queue."""
        while True:
            pods, nodes = self.lifecycle.pods, self.provisioner.nodes
            states = [p.state for p in pods if p.role == "serving"]
            self.series.append(
                {
                    "time_s": self.env.now,
                    "desired_replicas": float(self.lifecycle.desired),
                    "pods_pending": float(states.count("pending")),
                    "pods_starting": float(states.count("starting")),
                    "pods_ready": float(states.count("ready")),
                    "pods_draining": float(states.count("draining")),
                    "pods_crashloop": float(states.count("crashloop")),
                    "pods_warm": float(sum(1 for p in pods if p.role == "warm" and p.state == "ready")),
                    "nodes_ready": float(sum(1 for n in nodes if n.state == "ready")),
                    "nodes_provisioning": float(sum(1 for n in nodes if n.state == "provisioning")),
                    "gateway_queue": float(self.gateway.num_held),
                    "outstanding": float(sum(p.outstanding for p in pods)),
                }
            )
            yield self.env.timeout(self.window_s)

    def close(self) -> None:
        """One row per pod, as it stands at the end."""
        for pod in self.lifecycle.pods:
            self.pod_rows.append(
                {
                    "pod": pod.index,
                    "role": pod.role,
                    "node": pod.node.index if pod.node else -1,
                    "nodes": len(pod.nodes),
                    "state": pod.state,
                    "created_s": pod.created_s,
                    "bound_s": pod.bound_s,
                    "ready_s": pod.ready_s,
                    "ended_s": pod.ended_s,
                    "end_reason": pod.end_reason,
                    **{f"{name}_s": stop - start for name, start, stop in pod.phases},
                }
            )

    def cost(self) -> dict[str, float]:
        """Node-hours, GPU-hours and dollars (the pool's node price, or GPUs x the profile's GPU-hour price)."""
        node_hours = gpu_hours = dollars = 0.0
        for node in self.provisioner.nodes:
            end = node.ended_s if node.ended_s >= 0 else self.env.now
            hours = max(0.0, end - node.requested_s) / 3600
            price = node.pool.price_per_node_hour_usd
            if price is None:
                price = node.gpus * load_hardware(node.pool.hardware).price_per_gpu_hour_usd
            node_hours += hours
            gpu_hours += hours * node.gpus
            dollars += hours * price
        return {"node_hours": node_hours, "gpu_hours": gpu_hours, "cost_usd": dollars}
