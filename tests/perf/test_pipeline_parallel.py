"""Pipeline parallelism in the memory plan and the iteration model, against numbers worked by hand from
Llama-3.1-70B's config.json (hidden 8192, MLP 28672, 64 heads, 8 KV heads of 128, 80 layers, vocabulary
128256, embeddings not tied) and vLLM's layer split."""

from __future__ import annotations

import math

import pytest

from ttftsim.config.engine import EngineArgs
from ttftsim.config.resolved_engine import resolve_engine
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.iteration import Deployment, IterationModel, pipeline_partition
from ttftsim.perf.memory import CUDA_CONTEXT_BYTES, CUDAGRAPH_BYTES, MemorySettings, nccl_reserve_bytes, plan_memory

H100 = load_hardware("H100-SXM5-80GB")
LLAMA_70B = load_model("Llama-3.1-70B")
PER_LAYER_BF16 = 2 * (2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192)  # 1,711,308,800 bytes
TABLE_BF16 = 2 * 128256 * 8192  # one embedding table: 2,101,346,304 bytes


def test_layers_split_as_vllm_get_pp_indices() -> None:
    assert pipeline_partition(80, 2) == (40, 40)
    assert pipeline_partition(61, 4) == (15, 15, 16, 15)  # the remainder before the last stage
    assert pipeline_partition(32, 3) == (11, 11, 10)
    assert pipeline_partition(126, 8) == (15, 16, 16, 16, 16, 16, 16, 15)  # Llama-3.1-405B on 8 stages


def test_each_stage_holds_its_layers_and_the_tightest_sets_the_blocks() -> None:
    deployment = Deployment(LLAMA_70B, H100, tp=4, pp=2)
    settings = MemorySettings()
    plan = plan_memory(deployment, settings)
    # the last stage: 40 layers, the final norm and the LM head, split over 4 GPUs
    assert plan.weight_bytes == math.ceil((40 * PER_LAYER_BF16 + TABLE_BF16 + 2 * 8192) / 4) == 17_638_428_672
    assert plan.kv_bytes_per_token == 2 * 40 * 2 * 128 * 2  # 40 layers, 2 of the 8 KV heads per GPU, K and V
    requested = math.ceil(H100.memory_bytes * 0.9)
    reserves = CUDA_CONTEXT_BYTES + nccl_reserve_bytes(H100, 4) + CUDAGRAPH_BYTES
    kv_cache = requested - plan.weight_bytes - plan.activation_bytes - reserves
    assert plan.num_blocks == kv_cache // (16 * 40_960)
    one_stage = plan_memory(Deployment(LLAMA_70B, H100, tp=4), settings)
    assert one_stage.weight_bytes == math.ceil((80 * PER_LAYER_BF16 + 2 * TABLE_BF16 + 2 * 8192) / 4)
    assert plan.num_blocks > 2 * one_stage.num_blocks  # half the layers per GPU and twice the room


def test_a_batch_takes_the_whole_model_time_split_over_stages_plus_the_sends() -> None:
    shape = BatchShape.from_sequences([2000], [0])
    staged = IterationModel(Deployment(LLAMA_70B, H100, tp=4, pp=2))
    whole = IterationModel(Deployment(LLAMA_70B, H100, tp=4))
    stages = staged.stage_times(shape, hidden_host=False)
    assert sum(stages) == pytest.approx(whole.idle_start_s(shape), rel=1e-12)  # same work, split by layers
    hidden = staged.stage_times(shape, hidden_host=True)  # scheduled while a batch is in flight
    assert stages[0] - hidden[0] == pytest.approx(staged.overhead_s(shape))  # the host time, then hidden
    assert hidden[0] < hidden[1] == stages[1]  # equal layers; the last adds the final norm and the LM head
    link = H100.intra_node_link  # two stages of TP4 share one 8-GPU node
    hidden_and_residual = 2 * 2000 * 8192 * 2 / 4  # bytes per TP rank
    assert staged.transfer_times(shape) == [pytest.approx(link.latency_s + hidden_and_residual / link.bw_bytes_per_s)]


def test_stages_on_different_nodes_send_over_the_network() -> None:
    deployment = Deployment(LLAMA_70B, H100, tp=8, pp=2)  # the LeaderWorkerSet TP8 x PP2 layout
    assert deployment.stage_link(0) == H100.inter_node_link
    assert Deployment(LLAMA_70B, H100, tp=2, pp=4).stage_link(0) == H100.intra_node_link
    assert Deployment(LLAMA_70B, H100, tp=2, pp=8).stage_link(3) == H100.inter_node_link  # GPUs 6-7 -> 8-9


def test_async_scheduling_with_pipeline_parallelism_is_refused_by_014_and_on_from_015() -> None:
    args = EngineArgs(vllm_version="0.14.1", tensor_parallel_size=4, pipeline_parallel_size=2)
    resolved = resolve_engine(args, H100, 131072, "bf16")
    assert (resolved.async_scheduling, resolved.pp, resolved.gpus) == (False, 2, 8)
    with pytest.raises(ValueError, match="async_scheduling is not compatible with pipeline_parallel_size > 1"):
        resolve_engine(args.model_copy(update={"async_scheduling": True}), H100, 131072, "bf16")
    later = resolve_engine(args.model_copy(update={"vllm_version": "0.15.1"}), H100, 131072, "bf16")
    assert later.async_scheduling  # no pipeline gate in 0.15's VllmConfig: the batch queue is PP deep either way


def test_more_stages_than_layers_is_refused() -> None:
    with pytest.raises(ValueError, match="pipeline parallel size 81 exceeds"):
        Deployment(LLAMA_70B, H100, tp=1, pp=81)
