"""The real vLLM engine's closed loop, step by step (benchmarks/vllm_cpu/closed_loop_trace.py, recorded on the CPU
server in float32): with the step costs of an independent microbenchmark, ttftsim prefills the same requests
together in every step of the run. Requests of one length that finish together send again together, so each
round's grouping carries into the next; the real engine's groups break up within four rounds (a pair whose second
prompt is chunked at the token budget finishes a step after the first). The grouping turns on the token budget's
chunking (with a budget of 1,024 instead of 512 the first step already differs); at these step times (prefills
0.2-0.3 s) the milliseconds of the API server and the front end do not change it. At 20-35 ms they do (the
last test).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "vllm_cpu"
TRACE = BENCH / "serve_runs" / "closed-loop-trace-fp32-amd1.json"
MICROBENCH = BENCH / "microbench-fp32-amd1.json"
SMALL_TRACE = BENCH / "serve_runs" / "closed-loop-trace-small-fp32-amd1.json"
SMALL_MICROBENCH = BENCH / "microbench-small-fp32-amd1.json"
HOST_API = BENCH / "api_server_costs-device-core-small-fp32-amd1.json"
sys.path.insert(0, str(BENCH))

from closed_loop_trace import DEPLOYMENT, host_api_costs, real_groups, simulated  # noqa: E402
from compare import fit_step_cost  # noqa: E402


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads(TRACE.read_text())


@pytest.fixture(scope="module")
def cost() -> dict[str, float]:
    return fit_step_cost(json.loads(MICROBENCH.read_text())["engines"]["main"]["microbenchmark"])


@pytest.mark.parametrize("name", ["closed-fixed-c8", "closed-fixed-c4"])
def test_every_step_prefills_what_the_real_engine_prefilled(record: dict, cost: dict[str, float], name: str) -> None:
    workload = record["workloads"][name]
    ttft, groups = simulated(workload, cost, DEPLOYMENT)
    real = real_groups(workload)
    assert sum(real) == len(workload["requests"])
    assert groups == real
    measured = np.array([r["ttft_s"] for r in workload["requests"]])
    assert abs(np.median(ttft) / np.median(measured) - 1) < 0.08


def test_the_real_groups_break_up(record: dict) -> None:
    """What the recorded engine did (the mechanism above): round one prefills 1, 1, 2, 2, 2 requests per step;
    by the fourth round each step finishes one."""
    real = real_groups(record["workloads"]["closed-fixed-c8"])
    assert real[:5] == [1, 1, 2, 2, 2]
    assert real[5:10] == [1, 1, 1, 2, 2]
    assert set(real[40:]) == {1}


def test_the_fast_loop_needs_the_servers_work_in_each_step(tmp_path: Path) -> None:
    """Prefill steps of 20-35 ms, decodes of 7-8 ms (a 2-layer model): the API server, the engine core and the
    client share one core, and each step waits for the API server's work on the outputs before it
    (engine.api_server_shares_core, the recorded deployment's layout). With it the 8-client loop's groups break
    up as the measured ones do (TTFT P50 43, P90 72 ms); without it ttftsim keeps its pairs and predicts twice
    the median."""
    record = json.loads(SMALL_TRACE.read_text())
    cost = fit_step_cost(json.loads(SMALL_MICROBENCH.read_text())["engines"]["main"]["microbenchmark"])
    model = tmp_path / "config.json"
    model.write_text(json.dumps(record["model_config"]))
    workload = record["workloads"]["closed-fixed-c8"]
    measured = np.percentile([r["ttft_s"] for r in workload["requests"]], [50, 90])
    api = host_api_costs(HOST_API)
    shared, _ = simulated(workload, cost, DEPLOYMENT, model, api)
    assert np.percentile(shared, [50, 90]) == pytest.approx(measured, rel=0.1)
    apart = tmp_path / "apart.yaml"
    apart.write_text(DEPLOYMENT.read_text().replace("api_server_shares_core: true", "api_server_shares_core: false"))
    alone, _ = simulated(workload, cost, apart, model, api)
    assert np.median(alone) > 1.8 * measured[0]
