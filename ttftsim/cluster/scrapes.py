"""What Prometheus scrapes from the serving pods for the HPA, a controller and alert rules
(serving-semantics.md 1.1 and 5): each
ready pod's vLLM gauges and the cluster's TTFT histogram counts, every scrape_interval_s, kept for the
rate window; and the HPA's metric inputs computed from them at a sync.

The TTFT histogram is vLLM's vllm:time_to_first_token_seconds summed over pods (from the engine's
arrival, not the gateway's, plus the API server's hand-offs inside vLLM's window); its P99 is
histogram_quantile over the counts that arrived in the rate window (an External metric). Gauges are Pods
metrics: the latest scrape's sample of each pod that is starting, ready or crash-looping; pods without a
sample count as missing. Not modelled: scrape jitter, the adapter's own cache, per-pod histograms.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy
from numpy.typing import NDArray

from ttftsim.cluster.hpa import ExternalMetricInput, MetricInput, PodsMetricInput
from ttftsim.cluster.metrics import TTFT_BUCKETS, histogram_quantile
from ttftsim.cluster.pod import Pod
from ttftsim.config.cluster_autoscaling import Autoscaling
from ttftsim.engine.data_parallel import queue_lengths
from ttftsim.engine.state import RequestState


class TtftHistogram:
    """Counts of first tokens per TTFT bucket (the last one +Inf), as every serving pod's engine reports them."""

    def __init__(self, extra_s: float = 0.0) -> None:
        self._counts = [0] * (len(TTFT_BUCKETS) + 1)  # a list: every first token counts one (numpy's item, 0.3 us)
        self.extra_s = extra_s  # the API server's hand-offs inside vLLM's window (api_server.server_ttft_extra_s)

    @property
    def counts(self) -> NDArray[np.int64]:
        """The counts so far, a copy."""
        return np.array(self._counts, dtype=np.int64)

    def observe(self, state: RequestState) -> None:
        # vLLM's histogram: from the engine's arrival to the output handler (metrics/prometheus.py server_ttft_s)
        ttft = state.first_token_s - state.submitted_s + self.extra_s
        self._counts[bisect.bisect_left(TTFT_BUCKETS, ttft)] += 1  # np.searchsorted(side="left") without numpy's call


@dataclass(frozen=True)
class PodGauges:
    """vLLM's gauges of one pod at a scrape, named as the HPA's metrics name them."""

    num_requests_waiting: float
    num_requests_running: float
    kv_cache_usage_perc: float


@dataclass(frozen=True)
class Scrape:
    time_s: float
    ttft_counts: NDArray[np.int64]  # cumulative counts per bucket at the scrape
    gauges: dict[int, PodGauges]  # by pod index: the ready serving pods


SCRAPE_INTERVAL_S = 15.0  # without an HPA (whose section sets it), what a controller or alert rules read


class Prometheus:
    """Scrapes every scrape interval (the HPA's, or SCRAPE_INTERVAL_S without one); keeps the scrapes of
    the longest rate window queried (the HPA's, or `keep_s`) and one interval more."""

    def __init__(
        self,
        env: simpy.Environment,
        spec: Autoscaling | None,
        histogram: TtftHistogram,
        serving: Callable[[], list[Pod]],
        keep_s: float = 0.0,
    ) -> None:
        self.env, self.spec, self.histogram, self.serving = env, spec, histogram, serving
        self.interval_s = spec.scrape_interval_s if spec is not None else SCRAPE_INTERVAL_S
        self.keep_s = max(spec.rate_window_s if spec is not None else 0.0, keep_s)
        self.scrapes: deque[Scrape] = deque()

    def run(self) -> Generator[simpy.Event, Any, None]:
        while True:
            gauges = {}
            for pod in self.serving():
                if pod.state == "ready" and pod.engine is not None:
                    waiting, running = queue_lengths(pod.engine)
                    gauges[pod.index] = PodGauges(float(waiting), float(running), pod.engine.kv.usage())
            now = self.env.now
            self.scrapes.append(Scrape(now, self.histogram.counts, gauges))
            while self.scrapes and self.scrapes[0].time_s < now - self.keep_s - self.interval_s:
                self.scrapes.popleft()
            yield self.env.timeout(self.interval_s)

    def ttft_quantile(self, q: float, window_s: float) -> float:
        """histogram_quantile(q, rate(ttft histogram[window_s])) now: over the counts between the first and
        the last scrape in the window; NaN with fewer than two scrapes or no first token between them."""
        window = [s for s in self.scrapes if s.time_s >= self.env.now - window_s]
        if len(window) < 2:
            return math.nan
        return histogram_quantile(q, TTFT_BUCKETS, window[-1].ttft_counts - window[0].ttft_counts)

    def gauge_mean(self, name: str) -> float:
        """avg(gauge) over the pods in the latest scrape; NaN when none reported."""
        gauges = self.scrapes[-1].gauges if self.scrapes else {}
        return float(np.mean([getattr(g, name) for g in gauges.values()])) if gauges else math.nan

    def metric_inputs(self) -> list[MetricInput]:
        """Each HPA metric's input now, in the order of the spec's metrics."""
        spec = self.spec
        assert spec is not None
        latest = self.scrapes[-1] if self.scrapes else None
        inputs: list[MetricInput] = []
        serving = [p for p in self.serving() if p.state in ("starting", "ready", "crashloop")]
        for metric in spec.metrics:
            if metric.name == "ttft_p99_s":
                inputs.append(ExternalMetricInput(self.ttft_quantile(0.99, spec.rate_window_s)))
                continue
            gauges = latest.gauges if latest else {}
            samples = tuple(getattr(gauges[p.index], metric.name) for p in serving if p.index in gauges)
            inputs.append(PodsMetricInput(samples, len(serving) - len(samples)))
        return inputs
