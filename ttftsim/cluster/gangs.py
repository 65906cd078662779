"""Multi-node pods without a gang scheduler (seed claim 5): kube-scheduler binds a LeaderWorkerSet group's
leader and worker pods one at a time, so two groups competing for nodes can each hold part of what they
need and wait for the rest (a partial placement that deadlocks until capacity arrives).

The queue order follows the LeaderWorkerSet controller (kubernetes-sigs/lws, `startupPolicy:
LeaderCreated`, its default): the leader StatefulSet's pods of every new group are created first, and a
group's worker StatefulSet once its leader exists, so the scheduling queue holds all the new leaders
before any worker (kube-scheduler's PrioritySort: equal priorities in creation order). Each member pod
goes through the usual filters and scores on its own (placement.pick_node) with its share of the group's
GPUs, so one member per node. A group cold-starts when its last member is bound (vLLM's multi-node
start waits for every rank), on its leader's node as a gang-scheduled group does.

With a gang scheduler (LWS with Volcano or the scheduler-plugins coscheduling PodGroup, or Kueue), the
group binds all or nothing (placement.Binder.pick). Not modelled: LWS's `LeaderReady` startup policy,
the members' image pulls overlapping the wait, the scheduler's per-pod backoff.
"""

from __future__ import annotations

from collections.abc import Sequence

from ttftsim.cluster.placement import Binder, Gang, Node, gpus_per_node, pick_node
from ttftsim.cluster.pod import Pod


def member_gang(binder: Binder) -> Gang | None:
    """How a group spreads over nodes of the first pool whose nodes are smaller than the pod (None: every
    pool's node holds a whole pod, so there are no member pods)."""
    for pool in binder.pools:
        gang = binder.shape.gang(gpus_per_node(pool))
        if gang.num_nodes > 1:
            return gang
    return None


def place_members(binder: Binder, pending: Sequence[Pod], nodes: list[Node], gang: Gang) -> None:
    """Bind what member pods a node takes now, leaders before workers: round r binds one more member of
    every pending group that holds r nodes. A group's nodes (leader first) are its pod's `node` and
    `workers`; it stays pending until it holds `gang.num_nodes` of them."""
    for rank in range(gang.num_nodes):
        for pod in pending:
            if len(pod.nodes) != rank:
                continue
            free = [n for n in nodes if n not in pod.nodes and n.index != pod.avoid_node]
            node = pick_node(free, binder.pod, gang.gpus_each, binder.rng)
            if node is None:
                continue
            binder.bind(pod.index, [node], share=gang.gpus_each)
            if pod.node is None:
                pod.node = node
            else:
                pod.workers.append(node)


def missing_members(pending: Sequence[Pod], gang: Gang) -> int:
    """Member pods still without a node, over every pending group."""
    return sum(gang.num_nodes - len(pod.nodes) for pod in pending)
