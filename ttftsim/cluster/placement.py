"""Nodes and kube-scheduler placement: Filters, then weighted Scores (serving-semantics.md 1.2).

Filters: NodeResourcesFit (GPUs, CPU, memory requests against what is left), required node affinity,
NoSchedule/NoExecute taints not tolerated, hard pod anti-affinity (at most max_per_node serving pods).
Scores, each normalized to [0, 100] and weighted as in default_plugins.go:
  TaintToleration x3 (PreferNoSchedule taints not tolerated; reversed, 100 when none has any),
  NodeAffinity x2 (sum of matching preferred weights, 100 * s / max),
  NodeResourcesFit x1 (LeastAllocated over cpu and memory, the incoming pod included),
  NodeResourcesBalancedAllocation x1 (100 * (1 - std of the cpu and memory fractions)),
  ImageLocality x1 (image size x the share of nodes holding it, scaled from 23 MB to 1000 MB).
PodTopologySpread and soft inter-pod terms score every node alike here (no topology domains modelled).
Ties are broken with the run's seeded random generator, as kube-scheduler breaks them at random.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ttftsim.config.cluster import NodePool, PodSpec

WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "BalancedAllocation": 1, "ImageLocality": 1}
IMAGE_MIN_BYTES = 23e6
IMAGE_MAX_BYTES = 1000e6


@dataclass
class Node:
    index: int
    pool: NodePool
    gpus: int
    state: str = "provisioning"  # provisioning -> ready -> removed | failed
    requested_s: float = 0.0
    ready_s: float = -1.0
    ended_s: float = -1.0
    pods: list[int] = field(default_factory=list)  # serving pods placed here (indices)
    used_gpus: int = 0
    used_cpus: float = 0.0
    used_memory_gib: float = 0.0
    image_cached: bool = False
    weights_cached: bool = False  # the node's page cache holds the model's weights
    compile_cached: bool = False
    empty_since_s: float = 0.0
    slots_per_gpu: int = 1  # pods that may share one GPU (time-slicing replicas)
    gpu_of: dict[int, int] = field(default_factory=dict)  # pod index -> its GPU on this node (first of its TP)

    def take_gpu(self, pod_index: int, slots: int) -> None:
        """Bind a pod: it gets the lowest GPU id with a free slot (ids name GPUs, or TP groups; only which
        pods share one matters)."""
        taken = [0] * (max(self.gpus, 1) + 1)
        for gpu in self.gpu_of.values():
            taken[gpu] += 1
        self.gpu_of[pod_index] = next(g for g, n in enumerate(taken) if n < self.slots_per_gpu)
        self.used_gpus += slots

    @property
    def labels(self) -> dict[str, str]:
        return {"pool": self.pool.name, **self.pool.labels}

    def fits(self, pod: PodSpec, gpus: int) -> bool:
        return (
            self.gpus * self.slots_per_gpu - self.used_gpus >= gpus
            and self.pool.cpus - self.used_cpus >= pod.cpus
            and self.pool.memory_gib - self.used_memory_gib >= pod.memory_gib
        )


def _matches(labels: dict[str, str], wanted: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in wanted.items())


def passes_filters(node: Node, pod: PodSpec, gpus: int) -> bool:
    """Whether kube-scheduler's filters let the pod onto the node (resources, affinity, taints, anti-affinity)."""
    if node.state != "ready" or not node.fits(pod, gpus):
        return False
    if not _matches(node.labels, pod.node_affinity.required):
        return False
    for taint in node.pool.taints:
        if taint.effect != "PreferNoSchedule" and not any(t.tolerates(taint) for t in pod.tolerations):
            return False
    return pod.max_per_node is None or len(node.pods) < pod.max_per_node


def could_ever_fit(pool: NodePool, pod: PodSpec, gpus: int, gpus_per_node: int) -> bool:
    """Whether an empty new node of the pool would pass the filters (what a provisioner checks)."""
    probe = Node(-1, pool, gpus_per_node, state="ready")
    return passes_filters(probe, pod, gpus)


def scores(nodes: list[Node], pod: PodSpec, gpus: int, all_nodes: int) -> list[float]:
    """Weighted total score of each (feasible) node."""
    taint_raw = [
        sum(
            1
            for t in n.pool.taints
            if t.effect == "PreferNoSchedule" and not any(tol.tolerates(t) for tol in pod.tolerations)
        )
        for n in nodes
    ]
    worst = max(taint_raw, default=0)
    taint = [100.0 - 100.0 * s / worst if worst else 100.0 for s in taint_raw]
    affinity_raw = [
        sum(term.weight for term in pod.node_affinity.preferred if _matches(n.labels, term.labels)) for n in nodes
    ]
    best = max(affinity_raw, default=0)
    affinity = [100.0 * s / best if best else 0.0 for s in affinity_raw]
    holders = sum(1 for n in nodes if n.image_cached)
    totals = []
    for i, node in enumerate(nodes):
        cpu = (node.used_cpus + pod.cpus) / node.pool.cpus
        memory = (node.used_memory_gib + pod.memory_gib) / node.pool.memory_gib
        least = ((1 - cpu) * 100 + (1 - memory) * 100) / 2
        balanced = (1 - abs(cpu - memory) / 2) * 100
        image = 0.0
        if node.image_cached:
            spread = pod.image_bytes * holders / max(all_nodes, 1)
            clamped = min(max(spread, IMAGE_MIN_BYTES), IMAGE_MAX_BYTES)
            image = 100.0 * (clamped - IMAGE_MIN_BYTES) / (IMAGE_MAX_BYTES - IMAGE_MIN_BYTES)
        totals.append(
            WEIGHTS["TaintToleration"] * taint[i]
            + WEIGHTS["NodeAffinity"] * affinity[i]
            + WEIGHTS["NodeResourcesFit"] * least
            + WEIGHTS["BalancedAllocation"] * balanced
            + WEIGHTS["ImageLocality"] * image
        )
    return totals


def pick_node(nodes: list[Node], pod: PodSpec, gpus: int, rng: np.random.Generator) -> Node | None:
    """The node kube-scheduler binds the pod to, or None (the pod stays Pending)."""
    feasible = [n for n in nodes if passes_filters(n, pod, gpus)]
    if not feasible:
        return None
    totals = scores(feasible, pod, gpus, sum(1 for n in nodes if n.state == "ready"))
    top = max(totals)
    best = [n for n, s in zip(feasible, totals, strict=True) if s == top]
    return best[int(rng.integers(len(best)))] if len(best) > 1 else best[0]


def unschedulable_reason(pool: NodePool, pod: PodSpec, gpus: int, gpus_per_node: int) -> str:
    """Why an empty node of the pool would refuse the pod ('' when it would take it)."""
    if gpus > gpus_per_node:
        return f"{gpus} GPUs > {gpus_per_node} per node"
    if pod.cpus > pool.cpus:
        return f"cpu request {pod.cpus:g} > {pool.cpus} allocatable"
    if pod.memory_gib > pool.memory_gib:
        return f"memory request {pod.memory_gib:g} GiB > {pool.memory_gib:g} GiB allocatable"
    labels = {"pool": pool.name, **pool.labels}
    if not _matches(labels, pod.node_affinity.required):
        return f"required node affinity {pod.node_affinity.required} does not match labels {labels}"
    for taint in pool.taints:
        if taint.effect != "PreferNoSchedule" and not any(t.tolerates(taint) for t in pod.tolerations):
            return f"taint {taint.key}={taint.value}:{taint.effect} not tolerated"
    return ""
