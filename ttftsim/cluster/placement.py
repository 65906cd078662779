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

The Binder runs the scheduling cycle for one pod and binds it: one node, or for a TP group larger than a
node a gang of whole nodes of one pool (LeaderWorkerSet, all or nothing), each giving the same GPU share.
Without a gang scheduler (pod.gang_scheduling false) the group's member pods are bound one at a time
instead (gangs.py).
Bound pods hold GPUs, CPU and memory on their nodes until released.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ttftsim.config.cluster_nodes import NodePool, PodSpec
from ttftsim.hardware.catalog import load_hardware

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
        pods share one matters). Pods that request no GPU fit in any number, so the ids run past the node's
        GPUs: each such pod beyond them gets an id of its own."""
        taken = Counter(self.gpu_of.values())
        self.gpu_of[pod_index] = next(g for g in itertools.count() if taken[g] < self.slots_per_gpu)
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


def gpus_per_node(pool: NodePool) -> int:
    """The pool's GPUs per node: its own setting, or its hardware profile's."""
    if pool.gpus_per_node is not None:
        return pool.gpus_per_node
    return load_hardware(pool.hardware).gpus_per_node


@dataclass(frozen=True)
class Gang:
    """How one pod spreads over nodes of some size: `num_nodes` nodes, `gpus_each` GPUs on each."""

    num_nodes: int
    gpus_each: int


@dataclass(frozen=True)
class PodShape:
    """The serving pod's GPU request and how many pods may share one GPU (time-slicing replicas)."""

    gpus: int
    pods_per_gpu: int = 1

    def gang(self, per_node: int) -> Gang:
        """On nodes of per_node GPUs: one node when the pod fits one, else ceil(gpus / per_node) nodes
        (gang-scheduled), the GPUs split evenly (rounded up)."""
        if self.gpus <= per_node * self.pods_per_gpu or per_node == 0:
            return Gang(1, self.gpus)
        size = math.ceil(self.gpus / per_node)
        return Gang(size, math.ceil(self.gpus / size))


class Binder:
    """Binds pods to nodes. Invariant: a node's used GPUs, CPUs and memory are the sums of the requests of
    the pods in its `pods` list (a gang member counts its share of the pod's GPUs)."""

    def __init__(self, pod: PodSpec, pools: list[NodePool], shape: PodShape, rng: np.random.Generator) -> None:
        self.pod, self.pools, self.shape, self.rng = pod, pools, shape, rng
        self.shares: dict[int, int] = {}  # pod index -> GPUs it holds on each of its nodes

    def pick(self, nodes: list[Node]) -> list[Node] | None:
        """The node, or all the nodes of a multi-node pod (all or nothing), kube-scheduler would bind."""
        single = pick_node(nodes, self.pod, self.shape.gpus, self.rng)
        if single is not None:
            return [single]
        for pool in self.pools:
            members = [n for n in nodes if n.pool is pool and n.state == "ready"]
            if not members:
                continue
            gang = self.shape.gang(members[0].gpus)
            if gang.num_nodes == 1:
                continue
            chosen: list[Node] = []
            for _ in range(gang.num_nodes):
                node = pick_node([n for n in members if n not in chosen], self.pod, gang.gpus_each, self.rng)
                if node is None:
                    break
                chosen.append(node)
            if len(chosen) == gang.num_nodes:
                return chosen
        return None

    def share(self, nodes: list[Node]) -> int:
        """GPUs the pod holds on each of its nodes."""
        return self.shape.gang(nodes[0].gpus).gpus_each if len(nodes) > 1 else self.shape.gpus

    def bind(self, pod_index: int, nodes: list[Node], share: int | None = None) -> None:
        """Bind the pod (or, with `share`, one more member pod of its group) to `nodes`."""
        share = self.share(nodes) if share is None else share
        self.shares[pod_index] = share
        for node in nodes:
            node.pods.append(pod_index)
            node.take_gpu(pod_index, share)
            node.used_cpus += self.pod.cpus
            node.used_memory_gib += self.pod.memory_gib

    def release(self, pod_index: int, nodes: list[Node], now: float) -> None:
        """Give back what the pod held; a node left without pods is empty from now (the node scale-down clock)."""
        share = self.shares.pop(pod_index, self.shape.gpus)
        for node in nodes:
            node.pods.remove(pod_index)
            node.gpu_of.pop(pod_index, None)
            node.used_gpus -= share
            node.used_cpus -= self.pod.cpus
            node.used_memory_gib -= self.pod.memory_gib
            if not node.pods:
                node.empty_since_s = now
