"""Gateway routing across ready replicas (serving-semantics.md part 2).

- round_robin: the next ready replica in turn (vLLM production-stack's default).
- least_outstanding: fewest requests in flight at the gateway; ties at random.
- power_of_two: two distinct replicas at random, the one with fewer in flight.
- session_affinity: a session sticks to the replica it first went to (while that one is ready);
  requests without a session, and new sessions, go to the least loaded.
- kv_aware: lowest KV-cache usage; ties at random.
- prefix_aware: the Gateway API Inference Extension / llm-d default profile: score = 2 x queue-scorer
  ((maxQ - q) / (maxQ - minQ) over waiting queues, 1 when all equal) + 2 x (1 - KV usage) + 3 x prefix-cache
  scorer (blocks of the prompt found in the replica's approximate index / blocks of the prompt). The index
  is built from routing history, 16-token blocks, an LRU of 31,250 blocks per replica; max score wins,
  ties at random. New replicas start with empty indexes, as their caches are empty.

kv_aware and prefix_aware read each pod's waiting queue and KV usage as the picker last scraped them:
every `metrics_refresh_s` on a fixed grid (GIE's --refresh-metrics-interval, 50 ms), each pod read at the
first pick after a grid instant, so requests routed in one interval see the same, possibly stale, values
(and may herd onto one pod). The gateway's own in-flight counts (least_outstanding, power_of_two,
session_affinity) are always current.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ttftsim.config.cluster import Router as RouterSpec
from ttftsim.engine.engine import Engine
from ttftsim.kvcache.hashing import block_hashes
from ttftsim.workload.request import Request

INDEX_BLOCK_TOKENS = 16
MAX_PREFIX_BLOCKS = 256


@dataclass(frozen=True, slots=True)
class PodMetrics:
    """What the picker scrapes from a pod: vllm:num_requests_waiting and vllm:kv_cache_usage_perc."""

    waiting: int
    kv_usage: float


class Routable(Protocol):
    index: int
    outstanding: int
    engine: Engine | None


class Router:
    def __init__(self, spec: RouterSpec, rng: np.random.Generator) -> None:
        self.spec = spec
        self.rng = rng
        self._turn = 0
        self._sessions: dict[int, int] = {}
        self._index: dict[int, OrderedDict[int, None]] = {}
        self._scrape = -1  # the grid instant (in refresh intervals) the scraped metrics belong to
        self._scraped: dict[int, PodMetrics] = {}

    def forget(self, pod_index: int) -> None:
        """A replica left: its cache index goes with it."""
        self._index.pop(pod_index, None)

    def pick(self, pods: list[Routable], req: Request, now: float) -> Routable:
        kind = self.spec.type
        if len(pods) == 1 and kind != "prefix_aware":
            chosen = pods[0]
        elif kind == "round_robin":
            chosen = pods[self._turn % len(pods)]
            self._turn += 1
        elif kind == "power_of_two":
            first, second = self.rng.choice(len(pods), size=2, replace=False)
            a, b = pods[int(first)], pods[int(second)]
            chosen = b if b.outstanding < a.outstanding else a
        elif kind == "session_affinity":
            chosen = self._session(pods, req)
        elif kind == "kv_aware":
            chosen = self._best(pods, [-metrics.kv_usage for metrics in self._metrics(pods, now)])
        elif kind == "prefix_aware":
            chosen = self._prefix_aware(pods, req, self._metrics(pods, now))
        else:
            chosen = self._least_outstanding(pods)
        return chosen

    def _metrics(self, pods: list[Routable], now: float) -> list[PodMetrics]:
        """Each pod's metrics from the latest scrape (read now if this is the first pick since it)."""
        scrape = math.floor(now / self.spec.metrics_refresh_s)
        if scrape != self._scrape:
            self._scrape = scrape
            self._scraped.clear()
        scraped = self._scraped
        for pod in pods:
            if pod.index not in scraped:
                engine = _engine(pod)
                scraped[pod.index] = PodMetrics(engine.num_waiting, engine.kv.usage())
        return [scraped[pod.index] for pod in pods]

    def _best(self, pods: list[Routable], values: list[float]) -> Routable:
        top = max(values)
        best = [p for p, v in zip(pods, values, strict=True) if v == top]
        return best[int(self.rng.integers(len(best)))] if len(best) > 1 else best[0]

    def _least_outstanding(self, pods: list[Routable]) -> Routable:
        return self._best(pods, [-float(p.outstanding) for p in pods])

    def _session(self, pods: list[Routable], req: Request) -> Routable:
        if req.session_id < 0:
            return self._least_outstanding(pods)
        wanted = self._sessions.get(req.session_id)
        for pod in pods:
            if pod.index == wanted:
                return pod
        chosen = self._least_outstanding(pods)
        self._sessions[req.session_id] = chosen.index
        return chosen

    def _prefix_aware(self, pods: list[Routable], req: Request, metrics: list[PodMetrics]) -> Routable:
        spec = self.spec
        blocks = min(req.prompt_tokens // INDEX_BLOCK_TOKENS, MAX_PREFIX_BLOCKS)
        hashes = block_hashes(req.segments, INDEX_BLOCK_TOKENS, blocks) if blocks else []
        low, high = min(m.waiting for m in metrics), max(m.waiting for m in metrics)
        totals = []
        for pod, scraped in zip(pods, metrics, strict=True):
            queue_score = 1.0 if high == low else (high - scraped.waiting) / (high - low)
            index = self._index.get(pod.index)
            matched = 0
            if index is not None:
                for block_hash in hashes:
                    if block_hash not in index:
                        break
                    matched += 1
            prefix = matched / len(hashes) if hashes else 0.0
            kv = 1.0 - scraped.kv_usage
            totals.append(spec.queue_weight * queue_score + spec.kv_weight * kv + spec.prefix_weight * prefix)
        chosen = self._best(pods, totals)
        index = self._index.setdefault(chosen.index, OrderedDict())
        for block_hash in hashes:
            index[block_hash] = None
            index.move_to_end(block_hash)
        while len(index) > spec.lru_blocks_per_pod:
            index.popitem(last=False)
        return chosen


def _engine(pod: Routable) -> Engine:
    assert pod.engine is not None
    return pod.engine
