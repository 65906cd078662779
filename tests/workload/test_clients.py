"""Benchmark clients: aiperf's warm-up barrier and synchronized start, and the turnaround between a
response and the next request, on a replica with known step costs (10 ms + 1 ms per token)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.factories import make_engine
from ttftsim.config.scenario import Client
from ttftsim.config.workload import SyntheticWorkload
from ttftsim.perf.linear import LinearStepModel
from ttftsim.workload.sources import WorkloadContext, start_workload


def _run(client: Client, clients: int, requests: int, prompts: dict[str, object], seqs: int = 256) -> pd.DataFrame:
    env, engine, recorder = make_engine(cost=LinearStepModel(0.01, 0.001), max_num_seqs=seqs)
    spec = SyntheticWorkload.model_validate(
        {
            "type": "synthetic",
            "arrivals": {"type": "closed_loop", "clients": clients},
            "prompt_tokens": prompts,
            "output_tokens": {"type": "fixed", "value": 4},
            "num_requests": requests,
        }
    )
    start_workload(env, spec, WorkloadContext(np.random.default_rng(0), Path()), engine.submit, client)
    env.run()
    return recorder.requests_frame().sort_values("request_id").reset_index(drop=True)


def test_aiperf_starts_the_measured_phase_with_every_client_once_the_warmup_has_returned() -> None:
    prompts = {"type": "fixed", "value": 100}  # one sequence at a time: warm-up responses end apart
    client = Client(tool="aiperf", warmup_requests=2, turnaround_s=0.002)
    frame = _run(client, clients=2, requests=4, prompts=prompts, seqs=1)
    warm, measured = frame.iloc[:2], frame.iloc[2:]
    assert warm["arrival_s"].tolist() == pytest.approx([0.002, 0.004], abs=1e-12)  # one process, one send each
    assert warm["finish_s"].iloc[0] < warm["finish_s"].iloc[1]
    opened = warm["finish_s"].max()  # the barrier opens with the last warm-up response: both clients send
    assert sorted(measured["arrival_s"]) == pytest.approx([opened + 0.002, opened + 0.004], abs=1e-12)


def test_without_a_barrier_each_client_sends_when_its_own_response_ends() -> None:
    prompts = {"type": "uniform", "low": 50, "high": 400}
    frame = _run(Client(tool="vllm-bench", turnaround_s=0.0), clients=2, requests=4, prompts=prompts)
    assert frame["arrival_s"].iloc[:2].tolist() == [0.0, 0.0]  # c requests go out together
    assert sorted(frame["arrival_s"].iloc[2:]) == pytest.approx(sorted(frame["finish_s"].iloc[:2]), abs=1e-12)


def test_turnaround_delays_the_next_request() -> None:
    prompts = {"type": "fixed", "value": 100}
    frame = _run(Client(tool="guidellm", turnaround_s=0.05), clients=1, requests=3, prompts=prompts)
    gaps = frame["arrival_s"].iloc[1:].to_numpy() - frame["finish_s"].iloc[:-1].to_numpy()
    assert frame["arrival_s"].iloc[0] == pytest.approx(0.05, abs=1e-12)
    assert gaps.tolist() == pytest.approx([0.05, 0.05], abs=1e-12)


def test_a_real_tool_refuses_an_ideal_ramp() -> None:
    from ttftsim.config.scenario import Scenario

    with pytest.raises(ValueError, match="ramp_up_s"):
        Scenario.model_validate(
            {
                "model": "Llama-3.1-8B",
                "hardware": "H100-SXM5-80GB",
                "client": {"tool": "aiperf"},
                "workload": {
                    "type": "synthetic",
                    "arrivals": {"type": "closed_loop", "clients": 2, "ramp_up_s": 1.0},
                    "prompt_tokens": {"type": "fixed", "value": 100},
                    "output_tokens": {"type": "fixed", "value": 4},
                    "num_requests": 4,
                },
            }
        )
