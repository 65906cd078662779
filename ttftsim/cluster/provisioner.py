"""Nodes and their provisioning: the node pools' initial nodes, a Karpenter / Cluster Autoscaler that adds
nodes for pods no ready node takes, and the removal of nodes left empty (serving-semantics.md 1.3).

A node is billed from its request to its removal. Scale-up: capacity already on its way is counted first;
then, per pod still without room, the first pool whose empty node would take it and that has room under
max_nodes gets a node (a gang of whole nodes for a pod larger than one node). The new node is Ready after
the provisioner's batching (Karpenter: 1 s; the Cluster Autoscaler: the next 10 s scan) and the pool's
provision_s. Scale-down: a ready node empty for scale_down_unneeded_s is removed, down to min_nodes.
Not modelled: consolidation (moving pods to pack nodes), spot interruptions, zones.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import simpy

from ttftsim.cluster.placement import (
    Gang,
    Node,
    PodShape,
    could_ever_fit,
    gpus_per_node,
    passes_filters,
    unschedulable_reason,
)
from ttftsim.config.cluster import Cluster
from ttftsim.config.cluster_nodes import NodePool

CA_SCAN_S = 10.0  # Cluster Autoscaler --scan-interval
KARPENTER_BATCH_S = 1.0  # BATCH_IDLE_DURATION
NODE_CHECK_S = 10.0  # how often empty nodes are looked for


class Provisioner:
    """Owns the nodes (indices in creation order). Invariant: a pool never has more than max_nodes nodes
    provisioning or ready, and never drops below min_nodes by scale-down."""

    def __init__(
        self, env: simpy.Environment, spec: Cluster, shape: PodShape, on_node_ready: Callable[[], None]
    ) -> None:
        self.env, self.spec, self.shape, self.on_node_ready = env, spec, shape, on_node_ready
        self.nodes: list[Node] = []

    def start(self) -> None:
        """The pools' initial nodes, Ready at time 0 (holding the image when the deployment starts warm)."""
        for pool in self.spec.node_pools:
            for _ in range(pool.initial_nodes):
                node = self._new_node(pool)
                node.state, node.ready_s = "ready", 0.0
                node.image_cached = node.image_cached or self.spec.start_warm

    @property
    def is_provisioning(self) -> bool:
        return any(n.state == "provisioning" for n in self.nodes)

    def provision(self, num_unplaced: int) -> None:
        """Nodes for pods no ready node takes: count capacity already on its way (and, for a multi-node pod,
        ready nodes with room for one of its members: a gang waiting for its last node), then add nodes."""
        incoming = [n for n in self.nodes if n.state == "provisioning"]
        room = sum(self.pods_fitting(n) for n in incoming)  # pods (fractions for multi-node pods)
        room += sum(self._member_room(n) for n in self.nodes if n.state == "ready")
        for _ in range(num_unplaced):
            if room >= 1 - 1e-9:
                room -= 1
                continue
            for pool in self.spec.node_pools:
                per_node = gpus_per_node(pool)
                gang = self.shape.gang(per_node)
                count = sum(1 for n in self.nodes if n.pool is pool and n.state in ("provisioning", "ready"))
                if count + gang.num_nodes <= pool.max_nodes and could_ever_fit(
                    pool, self.spec.pod, gang.gpus_each, per_node
                ):
                    for _ in range(gang.num_nodes):
                        node = self._new_node(pool)
                        self.env.process(self._provision_node(node))
                        room += self.pods_fitting(node)
                    room -= 1
                    break

    def provision_members(self, num_members: int, gang: Gang) -> None:
        """Without a gang scheduler the provisioner sees member pods, each asking for a node of its own:
        nodes on their way take one each, then each member left gets a node in the first pool that could
        host it and has room under max_nodes."""
        incoming = sum(1 for n in self.nodes if n.state == "provisioning")
        for _ in range(num_members - incoming):
            for pool in self.spec.node_pools:
                count = sum(1 for n in self.nodes if n.pool is pool and n.state in ("provisioning", "ready"))
                if count < pool.max_nodes and could_ever_fit(pool, self.spec.pod, gang.gpus_each, gpus_per_node(pool)):
                    self.env.process(self._provision_node(self._new_node(pool)))
                    break

    def _member_room(self, node: Node) -> float:
        """1 / gang size when the ready node takes one member of a multi-node pod, else 0."""
        gang = self.shape.gang(node.gpus)
        fits = gang.num_nodes > 1 and passes_filters(node, self.spec.pod, gang.gpus_each)
        return 1.0 / gang.num_nodes if fits else 0.0

    def pods_fitting(self, node: Node) -> float:
        """Serving pods an empty node of this kind takes (1 / gang size for a multi-node pod)."""
        pod = self.spec.pod
        gang = self.shape.gang(node.gpus)
        if gang.num_nodes > 1:
            return 1.0 / gang.num_nodes
        gpus = gang.gpus_each
        by_gpu = node.gpus * node.slots_per_gpu // gpus if gpus else 1 << 20
        by_cpu = int(node.pool.cpus // pod.cpus)
        by_mem = int(node.pool.memory_gib // pod.memory_gib)
        limit = min(by_gpu, by_cpu, by_mem)
        return min(limit, pod.max_per_node) if pod.max_per_node is not None else limit

    def fail(self, index: int) -> Node | None:
        """The index-th ready node (in creation order) fails now; None when there is no such node."""
        ready = [n for n in self.nodes if n.state == "ready"]
        if index >= len(ready):
            return None
        node = ready[index]
        node.state, node.ended_s = "failed", self.env.now
        return node

    def removal_loop(self) -> Generator[simpy.Event, Any, None]:
        """Remove nodes empty for scale_down_unneeded_s, down to each pool's min_nodes."""
        while True:
            yield self.env.timeout(NODE_CHECK_S)
            now = self.env.now
            for node in self.nodes:
                if node.state != "ready" or node.pods:
                    continue
                alive = sum(1 for n in self.nodes if n.pool is node.pool and n.state in ("ready", "provisioning"))
                if alive > node.pool.min_nodes and now - node.empty_since_s >= node.pool.scale_down_unneeded_s:
                    node.state, node.ended_s = "removed", now

    def unschedulable(self) -> list[str]:
        """Why a pending pod can go nowhere: per pool, the filter an empty node fails, or its size cap."""
        reasons = []
        for pool in self.spec.node_pools:
            per_node = gpus_per_node(pool)
            gang = self.shape.gang(per_node)
            why = unschedulable_reason(pool, self.spec.pod, gang.gpus_each, per_node * gang.num_nodes)
            if not why and sum(1 for n in self.nodes if n.pool is pool and n.state == "ready") >= pool.max_nodes:
                why = f"full at max_nodes {pool.max_nodes}"
            reasons.append(f"pool {pool.name}: {why or 'room expected'}")
        return reasons

    def close(self) -> None:
        """At the horizon: nodes still up end now (for the bill)."""
        for node in self.nodes:
            if node.ended_s < 0:
                node.ended_s = self.env.now

    def _new_node(self, pool: NodePool) -> Node:
        node = Node(
            len(self.nodes), pool, gpus_per_node(pool), requested_s=self.env.now, image_cached=pool.images_cached
        )
        node.slots_per_gpu = self.spec.interference.pods_per_gpu
        self.nodes.append(node)
        return node

    def _provision_node(self, node: Node) -> Generator[simpy.Event, Any, None]:
        now = self.env.now
        batch = KARPENTER_BATCH_S if node.pool.provisioner == "karpenter" else CA_SCAN_S - now % CA_SCAN_S
        yield self.env.timeout(batch + node.pool.provision_s)
        if node.state != "provisioning":
            return
        node.state, node.ready_s, node.empty_since_s = "ready", self.env.now, self.env.now
        self.on_node_ready()
