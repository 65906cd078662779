"""Prometheus' scrapes (what stays in the window, the TTFT P99 from the counts inside it, pods without a
sample) and the HPA's loop and activator on stand-ins for the lifecycle and the metrics, worked by hand."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import simpy

from tests.factories import make_engine
from ttftsim.cluster.autoscaler import Autoscaler
from ttftsim.cluster.hpa import ExternalMetricInput, MetricInput, PodsMetricInput
from ttftsim.cluster.pod import Pod
from ttftsim.cluster.run import run_cluster
from ttftsim.cluster.scrapes import Prometheus, TtftHistogram
from ttftsim.config.cluster_autoscaling import Autoscaling
from ttftsim.config.loading import load_file
from ttftsim.config.scenario import Scenario
from ttftsim.engine.recorder import Recorder
from ttftsim.engine.state import RequestState
from ttftsim.workload.request import Request


def first_tokens(histogram: TtftHistogram, ttft_s: float, count: int) -> None:
    for rid in range(count):
        state = RequestState(Request(rid, 0.0, 10, 1, ((rid, 10),)))
        state.submitted_s, state.first_token_s = 1.0, 1.0 + ttft_s
        histogram.observe(state)


def test_scrapes_keep_the_rate_window_and_the_p99_comes_from_the_counts_inside_it() -> None:
    env = simpy.Environment()
    spec = Autoscaling.model_validate(
        {
            "max_replicas": 4,
            "metrics": [{"name": "ttft_p99_s", "target": 0.1}, {"name": "num_requests_waiting", "target": 2}],
            "scrape_interval_s": 15,
            "rate_window_s": 30,
        }
    )
    _, engine, _ = make_engine()
    for rid in range(5):  # five requests waiting (their engine's environment never runs)
        engine.submit(Request(rid, 0.0, 10, 1, ((rid, 10),)))
    ready = Pod(0, "serving", 0.0, state="ready", engine=engine)
    starting = Pod(1, "serving", 0.0, state="starting")
    histogram = TtftHistogram()
    prometheus = Prometheus(env, spec, histogram, lambda: [ready, starting])
    env.process(prometheus.run())
    env.run(until=1.0)
    first_tokens(histogram, 0.2, 100)  # bucket (0.1, 0.25]
    env.run(until=15.5)
    p99, waiting = prometheus.metric_inputs()
    # scrapes at 0 and 15 s in the window: 100 first tokens, rank 99 of 100 inside (0.1, 0.25]
    assert isinstance(p99, ExternalMetricInput) and p99.value == pytest.approx(0.1 + 0.15 * 99 / 100)
    assert waiting == PodsMetricInput((5.0,), 1)  # the starting pod has no sample: missing
    env.run(until=31.0)
    (p99, _) = prometheus.metric_inputs()
    assert isinstance(p99, ExternalMetricInput) and math.isnan(p99.value)  # scrapes at 15 and 30 s: none between
    env.run(until=50.0)
    first_tokens(histogram, 3.0, 100)  # bucket (2.5, 5]
    env.run(until=60.5)
    # the 60 s scrape dropped those older than 60 - 30 - 15 = 15 s; the window (from 30.5 s): 45 and 60 s
    assert [s.time_s for s in prometheus.scrapes] == [15.0, 30.0, 45.0, 60.0]
    (p99, _) = prometheus.metric_inputs()
    assert isinstance(p99, ExternalMetricInput) and p99.value == pytest.approx(2.5 + 2.5 * 99 / 100)


def test_the_ttft_histogram_holds_vllms_window_the_hand_offs_inside_it_included() -> None:
    # the engine's arrival to first token is 95 ms; vLLM's histogram also holds the API server's 10 ms of
    # hand-offs inside its window, which move the request from the (0.08, 0.1] bucket to (0.1, 0.25]
    bare, with_extra = TtftHistogram(), TtftHistogram(0.01)
    first_tokens(bare, 0.095, 1)
    first_tokens(with_extra, 0.095, 1)
    assert bare.counts.nonzero()[0].tolist() == [7] and with_extra.counts.nonzero()[0].tolist() == [8]


class Lifecycle:
    """Stands in for the pod lifecycle: a fixed list of serving pods; scale_to calls are logged."""

    def __init__(self, env: simpy.Environment, states: list[str]) -> None:
        self.env = env
        self.pods = [Pod(i, "serving", 0.0, state=state) for i, state in enumerate(states)]
        self.scaled: list[tuple[float, int]] = []

    def serving(self) -> list[Pod]:
        return self.pods

    def scale_to(self, desired: int) -> None:
        self.scaled.append((self.env.now, desired))


class Metrics:
    def __init__(self, inputs: list[MetricInput]) -> None:
        self.inputs = inputs

    def metric_inputs(self) -> list[MetricInput]:
        return self.inputs


def autoscaler(states: list[str], inputs: list[MetricInput]) -> tuple[simpy.Environment, Autoscaler, Lifecycle]:
    env = simpy.Environment()
    spec = Autoscaling.model_validate(
        {
            "max_replicas": 10,
            "metrics": [{"name": "num_requests_waiting", "target": 2}, {"name": "ttft_p99_s", "target": 0.5}],
        }
    )
    lifecycle = Lifecycle(env, states)
    scaler = Autoscaler(env, spec, lifecycle, Metrics(inputs))  # type: ignore[arg-type]
    return env, scaler, lifecycle


def test_each_sync_reconciles_logs_the_metrics_and_scales_by_the_rate_limit() -> None:
    inputs: list[MetricInput] = [PodsMetricInput((6.0, 6.0, 6.0), 0), ExternalMetricInput(math.nan)]
    env, scaler, lifecycle = autoscaler(["ready", "ready", "starting"], inputs)
    env.process(scaler.run())
    env.run(until=16.0)
    # waiting 6 per pod against 2: ceil(3 x 3) = 9 (the TTFT P99 has no data); scale-up limit: the larger
    # of 3 + 4 pods and 3 x 200 % = 7
    assert lifecycle.scaled == [(15.0, 7)]
    row: dict[str, Any] = scaler.rows[0]
    assert {k: v for k, v in row.items() if k != "ttft_p99_s"} == {
        "time_s": 15.0,
        "current": 3,
        "ready": 2,
        "desired": 7,
        "num_requests_waiting": 6.0,
    }
    assert math.isnan(row["ttft_p99_s"])


def test_the_activator_starts_one_pod_only_when_none_is_serving() -> None:
    env, scaler, lifecycle = autoscaler([], [])
    env.run(until=3.0)
    scaler.activate()
    assert lifecycle.scaled == [(3.0, 1)]
    assert scaler.rows == [{"time_s": 3.0, "current": 0, "ready": 0, "desired": 1}]
    env, scaler, lifecycle = autoscaler(["starting"], [])
    scaler.activate()  # a pod is on its way: nothing to do
    assert lifecycle.scaled == [] and scaler.rows == []


def test_the_clusters_histogram_takes_the_api_servers_hand_offs_from_the_engine_version() -> None:
    # examples/cluster-spike.yaml names no API-server costs: vLLM's version profile gives 4.27 ms
    # (config/engine_versions.yaml), which the pods' builds carry to the HPA's histogram; 10 s of the run suffice
    example = Path(__file__).parents[2] / "examples" / "cluster-spike.yaml"
    scenario = load_file(Scenario, example).model_copy(update={"horizon_s": 10.0})
    cluster, _ = run_cluster(scenario, example.parent, 0, Recorder(0.0))
    assert cluster.prometheus is not None and cluster.prometheus.histogram.extra_s == 0.00427
