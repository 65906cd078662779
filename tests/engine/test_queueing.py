"""Closed-form queueing answers: M/D/1 mean wait, and the zero-load limit of TTFT."""

from __future__ import annotations

import numpy as np
import pytest

from tests.factories import feed, make_engine, request
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.linear import LinearStepModel


def test_constant_service_time_matches_md1_mean_wait() -> None:
    service, rho, count = 0.02, 0.6, 40_000
    rng = np.random.default_rng(7)
    arrivals = np.cumsum(rng.exponential(service / rho, count))
    env, engine, recorder = make_engine(cost=LinearStepModel(service), max_num_seqs=1)
    feed(env, engine, [request(i, float(t), 100, 1) for i, t in enumerate(arrivals)])
    env.run()
    waits = recorder.requests_frame()["queue_s"].to_numpy()
    expected = rho * service / (2 * (1 - rho))  # Pollaczek-Khinchine for deterministic service
    assert waits.mean() == pytest.approx(expected, rel=0.06)
    assert recorder.requests_frame()["ttft_s"].mean() == pytest.approx(expected + service, rel=0.03)


def test_ttft_at_low_poisson_load_approaches_the_zero_load_value() -> None:
    perf = IterationModel(Deployment(load_model("Llama-3.1-8B"), load_hardware("H100-SXM5-80GB")))
    zero_load = perf.time_s(BatchShape.from_sequences([1000], [0]))
    rng = np.random.default_rng(3)
    arrivals = np.cumsum(rng.exponential(10.0, 300))  # 0.1 req/s, each request busy ~1 s
    env, engine, recorder = make_engine(cost=perf)
    feed(env, engine, [request(i, float(t), 1000, 100) for i, t in enumerate(arrivals)])
    env.run()
    ttft = recorder.requests_frame()["ttft_s"]
    assert ttft.median() == pytest.approx(zero_load, rel=0.02)
    assert ttft.mean() == pytest.approx(zero_load, rel=0.10)
    assert ttft.min() == pytest.approx(zero_load, rel=1e-9)
