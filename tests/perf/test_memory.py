"""Memory plan: vLLM's accounting, and refusals that quote the numbers."""

from __future__ import annotations

import math

import pytest

from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.iteration import Deployment
from ttftsim.perf.memory import DoesNotFitError, MemorySettings, plan_memory


def _deployment(model: str, hw: str, tp: int, kv: str = "bf16") -> Deployment:
    return Deployment(load_model(model), load_hardware(hw), tp, "bf16", kv)  # type: ignore[arg-type]


def test_70b_bf16_on_one_h100_is_refused_with_numbers() -> None:
    with pytest.raises(DoesNotFitError) as info:
        plan_memory(_deployment("Llama-3.1-70B", "H100-SXM5-80GB", 1), MemorySettings())
    assert str(info.value) == (
        "Llama-3.1-70B in bf16 needs 141.1 GB of weights; TP=1 on H100-SXM5-80GB offers 77.0 GB "
        "at gpu_memory_utilization 0.9"
    )


def test_components_add_up_and_blocks_follow_page_size() -> None:
    deployment = _deployment("Llama-3.1-70B", "H100-SXM5-80GB", 4)
    plan = plan_memory(deployment, MemorySettings(gpu_memory_utilization=0.9))
    assert plan.requested_bytes == math.ceil(deployment.hardware.memory_bytes * 0.9)
    assert plan.kv_cache_bytes == (
        plan.requested_bytes - plan.weight_bytes - plan.activation_bytes - plan.non_torch_bytes - plan.cudagraph_bytes
    )
    assert plan.kv_bytes_per_token == 327_680 // 4
    assert plan.num_blocks == plan.kv_cache_bytes // (16 * 81_920)


def test_fp8_kv_doubles_the_tokens() -> None:
    bf16 = plan_memory(_deployment("Llama-3.1-8B", "H100-SXM5-80GB", 1), MemorySettings())
    fp8 = plan_memory(_deployment("Llama-3.1-8B", "H100-SXM5-80GB", 1, "fp8"), MemorySettings())
    assert fp8.num_blocks in (2 * bf16.num_blocks, 2 * bf16.num_blocks + 1)


def test_kv_heads_replicate_beyond_tp() -> None:
    plan = plan_memory(_deployment("Llama-3.1-8B", "H100-SXM5-80GB", 16), MemorySettings())
    assert plan.kv_bytes_per_token == 131_072 // 8  # 8 KV heads: each rank keeps at least one


def test_max_model_len_that_cannot_fit_one_sequence_is_refused() -> None:
    settings = MemorySettings(max_model_len=131_072, gpu_memory_utilization=0.95)
    with pytest.raises(DoesNotFitError, match="max_model_len 131072 needs"):
        plan_memory(_deployment("Llama-3.1-70B", "A100-SXM4-80GB", 2), settings)


def test_the_extensible_kv_cache_keeps_a_margin_below_the_whole_device() -> None:
    """vLLM 0.34 measure_kv_cache_bytes with gpu_memory_utilization unset (1.0): the device less
    max(1 GiB, 0.75 x the activation peak) caps the budget; with 0.9 asked for, the budget is the request, as
    the estimate-based sizing has it."""
    deployment = _deployment("Llama-3.1-8B", "H100-SXM5-80GB", 1)
    measured = plan_memory(deployment, MemorySettings(gpu_memory_utilization=1.0, measured_kv_sizing=True))
    margin = max(2**30, int(0.75 * measured.activation_bytes))
    used = measured.weight_bytes + measured.non_torch_bytes + measured.cudagraph_bytes + measured.activation_bytes
    assert measured.kv_cache_bytes == deployment.hardware.memory_bytes - margin - used
    assert measured.num_blocks == measured.kv_cache_bytes // (16 * 131_072)
    asked = MemorySettings(gpu_memory_utilization=0.9, measured_kv_sizing=True)
    assert plan_memory(deployment, asked).kv_cache_bytes == plan_memory(deployment, MemorySettings()).kv_cache_bytes
    amd = _deployment("Llama-3.1-8B", "MI300X-192GB", 1)  # ROCm keeps a 3 GiB floor
    on_amd = plan_memory(amd, MemorySettings(gpu_memory_utilization=1.0, measured_kv_sizing=True))
    used = on_amd.weight_bytes + on_amd.non_torch_bytes + on_amd.cudagraph_bytes + on_amd.activation_bytes
    assert (
        on_amd.kv_cache_bytes == amd.hardware.memory_bytes - max(3 * 2**30, int(0.75 * on_amd.activation_bytes)) - used
    )


def test_lora_slots_take_memory_before_the_kv_cache() -> None:
    """vLLM allocates max_loras stacked adapters of max_lora_rank when the model loads: Llama-3.1-8B at rank 16 is
    83,886,080 bytes a slot (tests/engine/test_lora.py), so 4 slots take 335,544,320 bytes from the KV cache; 64
    slots at rank 256 (1.34 GB each) do not fit beside the weights on one H100."""
    model, h100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM5-80GB")
    plain = plan_memory(Deployment(model, h100, 1, "bf16", "bf16"), MemorySettings())
    lora = plan_memory(Deployment(model, h100, 1, "bf16", "bf16", lora_rank=16), MemorySettings(lora_slots=4))
    assert lora.weight_bytes - plain.weight_bytes == 4 * 83_886_080
    assert lora.kv_cache_bytes == plain.kv_cache_bytes - 4 * 83_886_080
    with pytest.raises(DoesNotFitError, match=r"with 64 LoRA slots of rank 256 \(85\.9 GB\) needs 102\.0 GB"):
        plan_memory(Deployment(model, h100, 1, "bf16", "bf16", lora_rank=256), MemorySettings(lora_slots=64))
