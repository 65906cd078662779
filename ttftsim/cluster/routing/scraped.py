"""Routers on pod metrics the picker scrapes (serving-semantics.md part 2).

kv_aware and prefix_aware read each pod's waiting queue and KV usage as the picker last scraped them:
every `metrics_refresh_s` on a fixed grid (GIE's --refresh-metrics-interval, 50 ms), each pod read at the
first pick after a grid instant, so requests routed in one interval see the same, possibly stale, values
(and may herd onto one pod).

prefix_aware is the Gateway API Inference Extension / llm-d default profile: score = queue_weight x
queue-scorer ((maxQ - q) / (maxQ - minQ) over waiting queues, 1 when all equal) + kv_weight x (1 - KV
usage) + prefix_weight x prefix-cache scorer (blocks of the prompt found in the replica's approximate index
/ blocks of the prompt). The index is built from routing history, 16-token blocks, an LRU of
lru_blocks_per_pod blocks per replica; max score wins, ties at random. New replicas start with empty
indexes, as their caches are empty.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ttftsim.cluster.routing.base import PodT, Routable, Router, best
from ttftsim.config.cluster_routing import KvAwareRouter, PrefixAwareRouter
from ttftsim.kvcache.hashing import block_hashes
from ttftsim.workload.request import Request

INDEX_BLOCK_TOKENS = 16
MAX_PREFIX_BLOCKS = 256


@dataclass(frozen=True, slots=True)
class PodMetrics:
    """What the picker scrapes from a pod: vllm:num_requests_waiting and vllm:kv_cache_usage_perc."""

    waiting: int
    kv_usage: float


class MetricsScrape:
    """Pod metrics as of the latest grid instant: a pod is read at the first pick after the instant, then
    the same values serve every pick until the next one."""

    def __init__(self, refresh_s: float) -> None:
        self.refresh_s = refresh_s
        self._scrape = -1  # the grid instant (in refresh intervals) the scraped metrics belong to
        self._scraped: dict[int, PodMetrics] = {}

    def read(self, pods: Sequence[Routable], now: float) -> list[PodMetrics]:
        scrape = math.floor(now / self.refresh_s)
        if scrape != self._scrape:
            self._scrape = scrape
            self._scraped.clear()
        scraped = self._scraped
        for pod in pods:
            if pod.index not in scraped:
                engine = pod.engine
                assert engine is not None
                scraped[pod.index] = PodMetrics(engine.num_waiting, engine.kv.usage())
        return [scraped[pod.index] for pod in pods]


class KvAware(Router):
    """Lowest scraped KV-cache usage; ties at random."""

    def __init__(self, spec: KvAwareRouter, rng: np.random.Generator) -> None:
        self.rng = rng
        self.scrape = MetricsScrape(spec.metrics_refresh_s)

    def choose(self, pods: Sequence[PodT], req: Request, now: float) -> PodT:
        return best(pods, [-metrics.kv_usage for metrics in self.scrape.read(pods, now)], self.rng)


class PrefixAware(Router):
    """GIE's weighted scorers. Every pick, a single replica's included, scores and teaches the chosen
    replica's prefix index the request's blocks (most recent last; the oldest evicted beyond the LRU size)."""

    def __init__(self, spec: PrefixAwareRouter, rng: np.random.Generator) -> None:
        self.spec, self.rng = spec, rng
        self.scrape = MetricsScrape(spec.metrics_refresh_s)
        self._index: dict[int, OrderedDict[int, None]] = {}

    def forget(self, pod_index: int) -> None:
        """A replica left: its cache index goes with it."""
        self._index.pop(pod_index, None)

    def pick(self, pods: Sequence[PodT], req: Request, now: float) -> PodT:
        return self.choose(pods, req, now)

    def choose(self, pods: Sequence[PodT], req: Request, now: float) -> PodT:
        spec = self.spec
        metrics = self.scrape.read(pods, now)
        blocks = min(req.prompt_tokens // INDEX_BLOCK_TOKENS, MAX_PREFIX_BLOCKS)
        hashes = block_hashes(req.segments, INDEX_BLOCK_TOKENS, blocks) if blocks else []
        low, high = min(m.waiting for m in metrics), max(m.waiting for m in metrics)
        totals = []
        for pod, scraped in zip(pods, metrics, strict=True):
            queue_score = 1.0 if high == low else (high - scraped.waiting) / (high - low)
            prefix = self._matched(pod.index, hashes) / len(hashes) if hashes else 0.0
            kv = 1.0 - scraped.kv_usage
            totals.append(spec.queue_weight * queue_score + spec.kv_weight * kv + spec.prefix_weight * prefix)
        chosen = best(pods, totals, self.rng)
        index = self._index.setdefault(chosen.index, OrderedDict())
        for block_hash in hashes:
            index[block_hash] = None
            index.move_to_end(block_hash)
        while len(index) > spec.lru_blocks_per_pod:
            index.popitem(last=False)
        return chosen

    def _matched(self, pod_index: int, hashes: list[int]) -> int:
        """Leading blocks of the prompt found in the replica's index."""
        index = self._index.get(pod_index)
        matched = 0
        if index is not None:
            for block_hash in hashes:
                if block_hash not in index:
                    break
                matched += 1
        return matched
