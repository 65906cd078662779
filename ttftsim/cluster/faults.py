"""Injected failures (config.cluster.Fault): at its time a node fails with all its pods, or one pod fails.
A failed pod's requests go back to the gateway (retried or failed by the retry policy) and the ReplicaSet
replaces it with a new pod of the same role, which starts cold (or waits for a node); a lost serving pod is
replaced as a scale-up adds one (lifecycle.scale_to): by a ready warm pod at once where the pool has one (the pool
refilled cold), since the serving count fell below the desired one. Not modelled:
detection delays (node-monitor-grace-period), NoExecute tolerations, restarts in place.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import simpy

from ttftsim.cluster.lifecycle import PodLifecycle
from ttftsim.cluster.provisioner import Provisioner
from ttftsim.config.cluster import Fault


class Faults:
    """Runs the faults and logs each: its time, kind and index, and the pods lost (or why none)."""

    def __init__(self, env: simpy.Environment, provisioner: Provisioner, lifecycle: PodLifecycle) -> None:
        self.env, self.provisioner, self.lifecycle = env, provisioner, lifecycle
        self.log: list[dict[str, Any]] = []

    def start(self, faults: list[Fault]) -> None:
        for fault in faults:
            self.env.process(self.inject(fault))

    def inject(self, fault: Fault) -> Generator[simpy.Event, Any, None]:
        """Wait `at_s` (from now), then fail: the index-th ready node (in creation order), or the
        index-th live serving or prefill pod (in creation order)."""
        at_s, kind, index = fault.at_s, fault.kind, fault.index
        yield self.env.timeout(at_s)
        pods = self.lifecycle.pods
        if kind == "node":
            node = self.provisioner.fail(index)
            if node is None:
                self.log.append({"time_s": at_s, "kind": kind, "index": index, "effect": "no such node"})
                return
            victims = [pods[i] for i in list(node.pods)]
        else:
            live = [p for p in pods if p.role != "warm" and p.live]  # serving and prefill pods
            victims = live[index : index + 1]
        self.log.append({"time_s": at_s, "kind": kind, "index": index, "pods": [p.index for p in victims]})
        for pod in victims:
            role, replaced = pod.role, pod.state != "draining"  # a pod being scaled down is not replaced
            self.lifecycle.terminate(pod, loss_reason(kind), state="failed")
            if replaced and role == "serving":  # back to the desired count: a ready warm pod first
                self.lifecycle.scale_to(self.lifecycle.desired)
            elif replaced:
                self.lifecycle.new_pod(role)  # the ReplicaSet replaces it


def loss_reason(kind: str) -> str:
    """Why a request on a pod that a fault of this kind took down ended (its failed row's reason holds it)."""
    return f"lost in a {kind} failure"
