"""LoRA serving by hand: at most max_loras adapters in a batch (the rest skipped, not blocking), adapters
copied into GPU slots (and read from disk into host memory) before the step that first needs them, the
adapter's size, and the configs vLLM refuses (engine/lora.py, docs/engine-semantics.md 13)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from tests.factories import make_engine, request
from ttftsim.config.engine import EngineArgs
from ttftsim.config.scenario import Scenario
from ttftsim.engine.lora import LoraSlots
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.iteration import Deployment
from ttftsim.perf.linear import LinearStepModel
from ttftsim.workload.request import Request
from ttftsim.workload.sources import WorkloadContext, with_adapters

COST = LinearStepModel(0.01, 0.001)  # 10 ms a step + 1 ms per computed token


def adapter_request(rid: int, arrival: float, adapter: int) -> Request:
    return request(rid, arrival, 20, 3).replace(lora_id=adapter)


def test_the_slots_keep_the_most_recent_adapters_and_load_the_others() -> None:
    slots = LoraSlots(gpu_slots=2, cpu_slots=3, h2d_s=0.001, read_s=0.1)
    assert slots.load_s({1, 2}) == pytest.approx(2 * (0.1 + 0.001))  # read from disk, then copied in
    assert slots.load_s({2}) == 0.0  # in a slot
    assert slots.load_s({3}) == pytest.approx(0.101)  # evicts 1 from the GPU (still in host memory)
    assert slots.load_s({1}) == pytest.approx(0.001)  # back from host memory only
    assert (slots.loads, slots.reads) == (4, 3)


def test_a_batch_holds_at_most_max_loras_adapters_and_the_others_wait_without_blocking() -> None:
    env, engine, recorder = make_engine(cost=COST, enable_lora=True, max_loras=1, lora_h2d_s=0.0, lora_read_s=0.0)
    for req in (adapter_request(0, 0.0, 1), adapter_request(1, 0.0, 2), adapter_request(2, 0.0, 1)):
        engine.submit(req)
    env.run(until=10.0)
    rows = recorder.requests_frame().set_index("request_id")
    # step 1: requests 0 and 2 (adapter 1; request 1 skipped), 10 + 40 ms; two decode steps of 12 ms finish
    # them at 74 ms; then request 1 alone: 10 + 20 ms
    assert rows.loc[0, "first_token_s"] == rows.loc[2, "first_token_s"] == pytest.approx(0.050, abs=1e-12)
    assert rows.loc[0, "finish_s"] == pytest.approx(0.074, abs=1e-12)
    assert rows.loc[1, "first_token_s"] == pytest.approx(0.074 + 0.030, abs=1e-12)


def test_the_step_that_first_uses_an_adapter_pays_its_copy() -> None:
    env, engine, recorder = make_engine(cost=COST, enable_lora=True, max_loras=2, lora_h2d_s=0.002, lora_read_s=0.05)
    engine.submit(adapter_request(0, 0.0, 1))
    env.run(until=10.0)
    steps = recorder.steps_frame()
    assert steps["num_tokens"].tolist() == [20, 1, 1]
    assert steps.loc[0, "duration_s"] == pytest.approx(0.030 + 0.052, abs=1e-12)  # read + copy, then the prefill
    assert steps.loc[1, "duration_s"] == pytest.approx(0.011, abs=1e-12)  # in its slot from then on


def test_an_adapters_size_by_hand() -> None:
    llama = Deployment(load_model("Llama-3.1-8B"), load_hardware("H100-SXM5-80GB"), lora_rank=16)
    # (slices x in + out) of QKV 3x4096+6144, O 4096+4096, gate-up 2x4096+28672, down 14336+4096; rank 16, 32
    # layers, bf16: q_proj, k_proj and v_proj each have an A of 16 x 4096, gate_proj and up_proj too
    assert llama.lora_adapter_bytes(16) == 2 * 16 * 32 * (18432 + 8192 + 36864 + 18432) == 83_886_080


def test_adapters_are_drawn_by_popularity_and_share_prefixes_within_one_adapter_only() -> None:
    ctx = WorkloadContext(np.random.default_rng(0), Path("."))
    shared = ctx.content.new()
    requests = [Request(i, float(i), 120, 5, ((shared, 100), (ctx.content.new(), 20))) for i in range(2000)]
    lora = Scenario.model_validate(
        {
            "model": "Llama-3.1-8B",
            "hardware": "H100-SXM5-80GB",
            "engine": {"enable_lora": True},
            "workload": {
                "type": "synthetic",
                "arrivals": {"type": "poisson", "rate": 1},
                "prompt_tokens": {"type": "fixed", "value": 20},
                "output_tokens": {"type": "fixed", "value": 5},
                "num_requests": 1,
                "lora": {"adapters": 4, "rank": 8, "zipf_exponent": 1.0},
            },
        }
    ).workload.lora
    assert lora is not None
    served = with_adapters(requests, lora, ctx)
    counts = np.bincount([r.lora_id for r in served], minlength=5)
    weights = np.array([1, 1 / 2, 1 / 3, 1 / 4]) / sum([1, 1 / 2, 1 / 3, 1 / 4])  # Zipf, s = 1
    assert counts[0] == 0 and np.allclose(counts[1:] / 2000, weights, atol=0.03)
    prefixes = {(r.lora_id, r.segments[0][0]) for r in served}
    assert len(prefixes) == 4 and len({content for _, content in prefixes}) == 4  # one shared prompt per adapter


def test_configs_vllm_refuses_name_the_field() -> None:
    base = {
        "model": "Llama-3.1-8B",
        "hardware": "H100-SXM5-80GB",
        "workload": {
            "type": "synthetic",
            "arrivals": {"type": "poisson", "rate": 1},
            "prompt_tokens": {"type": "fixed", "value": 20},
            "output_tokens": {"type": "fixed", "value": 5},
            "num_requests": 1,
            "lora": {"adapters": 4, "rank": 32},
        },
    }
    with pytest.raises(ValidationError, match=r"set engine.enable_lora true"):
        Scenario.model_validate(base)
    with pytest.raises(ValidationError, match=r"workload.lora.rank 32 is above engine.max_lora_rank 16"):
        Scenario.model_validate({**base, "engine": {"enable_lora": True}})
    with pytest.raises(ValidationError, match="max_cpu_loras 1 is below max_loras 2"):
        EngineArgs(enable_lora=True, max_loras=2, max_cpu_loras=1)


def test_the_lora_kernels_read_every_active_adapter() -> None:
    from ttftsim.perf.iteration import IterationModel

    model = IterationModel(Deployment(load_model("Llama-3.1-8B"), load_hardware("H100-SXM5-80GB"), lora_rank=16))
    one, four = model.lora_s(8, 1), model.lora_s(8, 4)
    assert 0 < one < four <= 4 * one  # memory-bound at 8 tokens: the adapters' weights dominate
