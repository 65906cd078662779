"""Which pods a scale-down removes: strategy objects chosen by `autoscaling.scale_down_ranking`.

ReplicaSetRanking is the ReplicaSet controller's own order: kubernetes pkg/controller/controller_utils.go,
`ActivePodsWithRanks.Less` (v1.22 and later), sorted by `getPodsToDelete` in
pkg/controller/replicaset/replica_set.go, which deletes the first pods. Pod i goes before pod j when, at the
first rule that tells them apart:
 1. i has no node and j has one (our `pending`);
 2. i's phase is earlier: Pending < Unknown < Running (a pod still pulling its image is Pending);
 3. i is not ready and j is (starting or crash-looping);
 4. i's `controller.kubernetes.io/pod-deletion-cost` is lower (all 0 unless a controller sets them);
 5. i has more pods of the workload on its node (`getPodsRankedByRelatedPodsOnSameNode`: doubled-up pods go
    first, which spreads what is left over nodes);
 6. both ready, at different times: i became ready later; with LogarithmicScaleDown (beta and on from 1.22,
    GA 1.31) the times are compared as floor(log2(nanoseconds since)) and, in the same bucket, by UID;
 7. i's containers restarted more (a crash loop);
 8. i was created later (logarithmic buckets too, then UID).
Kubernetes times have one-second resolution (metav1.Time), so "at different times" is whole seconds here.
UIDs are random; a fixed hash of the pod's index stands in for one, and also orders pods no rule tells apart
(Go's sort.Sort leaves those in an order that depends on the informer's listing).

DeletionCostRanking: a controller keeps each pod's deletion cost at its requests in flight (the use that
pod-deletion-cost was made for: Kubernetes docs, ReplicaSet, "Pod deletion cost"), so rule 4 removes the
least busy ready pods first.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections import Counter
from typing import Protocol

from ttftsim.cluster.pod import Pod
from ttftsim.config.cluster_autoscaling import DeletionCostScaleDown, ReplicaSetScaleDown

PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


class ScaleDownRanking(Protocol):
    def order(self, pods: list[Pod], now_s: float) -> list[Pod]:
        """`pods` (the workload's live serving pods) in the order a scale-down removes them."""
        ...


def pseudo_uid(index: int) -> str:
    """A pod's stand-in for its random UID: fixed for the pod, unrelated to creation order."""
    return hashlib.sha256(f"pod-{index}".encode()).hexdigest()


def log2_rank(age_s: float) -> int:
    """LogarithmicScaleDown's rank of a time: floor(log2(nanoseconds since it)), -1 when not in the past."""
    nanoseconds = age_s * 1e9
    return int(math.log2(nanoseconds)) if nanoseconds > 0 else -1


def phase(pod: Pod) -> str:
    """The pod's Kubernetes phase: Pending until its image is pulled (the first cold-start phase ends)."""
    if pod.node is None or (not any(name == "image_pull" for name, _, _ in pod.phases) and pod.state == "starting"):
        return "Pending"
    return "Running"


class ReplicaSetRanking:
    def __init__(self, spec: ReplicaSetScaleDown | DeletionCostScaleDown) -> None:
        self.logarithmic = spec.logarithmic

    def deletion_cost(self, pod: Pod) -> float:
        return 0.0

    def order(self, pods: list[Pod], now_s: float) -> list[Pod]:
        on_node = Counter(id(p.node) for p in pods if p.node is not None)

        def first(a: Pod, b: Pod) -> int:
            return -1 if self.before(a, b, now_s, on_node) else (1 if self.before(b, a, now_s, on_node) else 0)

        return sorted(sorted(pods, key=lambda p: pseudo_uid(p.index)), key=functools.cmp_to_key(first))

    def before(self, a: Pod, b: Pod, now_s: float, on_node: Counter[int]) -> bool:
        """ActivePodsWithRanks.Less(a, b): rules 1-8 above."""
        if (a.node is None) != (b.node is None):
            return a.node is None
        if PHASE_ORDINAL[phase(a)] != PHASE_ORDINAL[phase(b)]:
            return PHASE_ORDINAL[phase(a)] < PHASE_ORDINAL[phase(b)]
        if (a.state == "ready") != (b.state == "ready"):
            return a.state != "ready"
        if self.deletion_cost(a) != self.deletion_cost(b):
            return self.deletion_cost(a) < self.deletion_cost(b)
        rank_a, rank_b = (on_node[id(p.node)] if p.node is not None else 0 for p in (a, b))
        if rank_a != rank_b:
            return rank_a > rank_b
        if a.state == "ready" and b.state == "ready":
            later = self._later(math.floor(a.ready_s), math.floor(b.ready_s), a, b, now_s)
            if later is not None:
                return later
        restarts_a, restarts_b = (int(p.state == "crashloop") for p in (a, b))
        if restarts_a != restarts_b:
            return restarts_a > restarts_b
        later = self._later(math.floor(a.created_s), math.floor(b.created_s), a, b, now_s)
        return bool(later)

    def _later(self, at_a: float, at_b: float, a: Pod, b: Pod, now_s: float) -> bool | None:
        """Whether a's time is later than b's (None when equal): by log2 buckets and then UID when logarithmic."""
        if at_a == at_b:
            return None
        if not self.logarithmic:
            return at_a > at_b
        difference = log2_rank(now_s - at_a) - log2_rank(now_s - at_b)
        return pseudo_uid(a.index) < pseudo_uid(b.index) if difference == 0 else difference < 0


class DeletionCostRanking(ReplicaSetRanking):
    def deletion_cost(self, pod: Pod) -> float:
        return float(pod.outstanding)


def make_ranking(spec: ReplicaSetScaleDown | DeletionCostScaleDown) -> ScaleDownRanking:
    if isinstance(spec, DeletionCostScaleDown):
        return DeletionCostRanking(spec)
    return ReplicaSetRanking(spec)
