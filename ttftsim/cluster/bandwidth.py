"""GPU memory-bandwidth utilisation of the serving pods, derived from the iteration model (seed claim 11's
signal; what DCGM exports as DCGM_FI_PROF_DRAM_ACTIVE, the fraction of time the device memory interface
is busy, averaged over its sample period).

Each iteration of a pod reads, on each of its GPUs, its shard of the weights and of the KV cache in use:
(weight_bytes + kv_usage x the cache's bytes) / TP, with the cache's bytes = blocks x block size x KV
bytes per token. Over a window, a pod's utilisation is the bytes its iterations read in the window
(an iteration straddling an edge counts by its overlap) / (window x the GPU's peak memory bandwidth), so
idle time counts as zero. The figure is the GPU's, as DCGM reports it: pods sharing the GPU
(time-slicing or MPS replicas) add their reads. A closed-form decode run (one recorder row for several steps) reads its
row's KV usage for every step. Not modelled: activation traffic, the KV written, caches (L2) that save
reads, and kernels that read below peak bandwidth (an iteration counts as reading at its average rate).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ttftsim.cluster.pod import Pod
from ttftsim.engine.recorder import Recorder
from ttftsim.hardware.catalog import load_hardware


@dataclass(frozen=True)
class Reads:
    """Bytes one recorder row read on each GPU of its pod, between start_s and end_s."""

    start_s: float
    end_s: float
    bytes_per_gpu: float


def bytes_per_gpu(pod: Pod, kv_usage: float, num_steps: int) -> float:
    """What `num_steps` iterations of the pod read on each of its GPUs. A data-parallel rank's row (the pod's
    rows are its ranks') reads its own TP GPUs' weights and KV, counted as the mean over the pod's DP ranks (the
    pod's weight bytes are over all its TP x DP GPUs; its KV bytes per token and blocks are one rank's)."""
    engine = pod.engine
    if engine is None:
        return 0.0
    dp = engine.cfg.dp
    kv_bytes = engine.num_blocks * engine.cfg.block_size * pod.kv_bytes_per_token
    return num_steps * (pod.weight_bytes / dp + kv_usage * kv_bytes) / max(engine.cfg.tp * dp, 1)


class BandwidthMeter:
    """Reads the serving recorder's iteration rows as they are appended (a cursor, so each row once) and
    keeps each pod's reads for the last `window_s`."""

    def __init__(self, recorder: Recorder, pods: Callable[[], list[Pod]], window_s: float) -> None:
        self.recorder, self.pods, self.window_s = recorder, pods, window_s
        self.cursor = 0
        self.reads: dict[int, deque[Reads]] = {}

    def _take_new_rows(self) -> None:
        pods = self.pods()
        rows = self.recorder.steps
        for start, duration, replica, _tokens, _running, _waiting, kv_usage, steps in rows.rows_from(self.cursor):
            if replica < len(pods):
                read = bytes_per_gpu(pods[replica], kv_usage, steps)
                self.reads.setdefault(replica, deque()).append(Reads(start, start + duration, read))
        self.cursor = len(rows)

    def utilisation(self, pod: Pod, now_s: float) -> float:
        """Utilisation of the pod's (first) GPU over (now_s - window_s, now_s], its reads and those of the
        pods sharing that GPU; NaN for a pod that is not ready."""
        self._take_new_rows()
        node = pod.node
        if pod.state != "ready" or node is None:
            return math.nan
        gpu = node.gpu_of.get(pod.index)
        sharing = [i for i, g in node.gpu_of.items() if g == gpu] if gpu is not None else [pod.index]
        total = sum(self._bytes(index, now_s) for index in sharing)
        return total / (self.window_s * load_hardware(node.pool.hardware).mem_bw_bytes_per_s)

    def _bytes(self, index: int, now_s: float) -> float:
        """Bytes per GPU pod `index` read in the window (its older reads dropped)."""
        since = now_s - self.window_s
        reads = self.reads.get(index, deque())
        while reads and reads[0].end_s <= since:
            reads.popleft()
        total = 0.0
        for read in reads:
            span = read.end_s - read.start_s
            inside = min(read.end_s, now_s) - max(read.start_s, since)
            if span <= 0:
                total += read.bytes_per_gpu if since < read.start_s <= now_s else 0.0
            elif inside > 0:
                total += read.bytes_per_gpu * inside / span
        return total

    def mean(self, pods: list[Pod], now_s: float) -> float:
        """avg over the ready pods among `pods` (NaN when none is ready)."""
        values = [u for u in (self.utilisation(p, now_s) for p in pods) if not math.isnan(u)]
        return sum(values) / len(values) if values else math.nan
