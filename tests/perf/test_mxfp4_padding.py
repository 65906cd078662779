"""vLLM's padding of MXFP4 experts on a deployment's GPUs: in the weights of one GPU, out of the KV cache, and in
the MoE kernel's shape (config/dtypes.py mxfp4_expert_padding, perf/memory.py, perf/ffn.py).

gpt-oss (config.json: hidden_size 2880, intermediate_size 2880; 128 experts of top-4 on 36 layers in -120b, 32 on
24 in -20b). One expert: three 2880 x 2880 projections and biases 2 x 2880 + 2880, 24,891,840 parameters at
MXFP4's 17/32 bytes. On one A100, Marlin pads it to hidden 3072 and intermediate 2944 (27,140,864 parameters):
36 x 128 x 2,249,024 x 17/32 = 5,505,610,752 bytes more for gpt-oss-120b."""

from __future__ import annotations

import math

import pytest

from ttftsim.config.dtypes import MARLIN_PADDING, NO_PADDING
from ttftsim.config.hardware import HardwareProfile
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.ffn import FfnCosts
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.kernels import MoeShape, RooflineCosts
from ttftsim.perf.memory import MemorySettings, plan_memory, stage_weight_bytes

MXFP4_BYTES = 17 / 32
PADDED_BYTES = 36 * 128 * (27_140_864 - 24_891_840) * 17 // 32  # 5,505,610,752
GPT_OSS = {"gpt-oss-120b": (36, 128), "gpt-oss-20b": (24, 32)}  # (MoE layers, experts a layer)
CHECKPOINT = {"gpt-oss-120b": 65_190_335_616, "gpt-oss-20b": 13_751_515_776}  # test_presets: 65.2 and 13.8 GB


def _expert(hidden: int, inter: int) -> int:
    """One gpt-oss expert's parameters at this (padded) shape: three projections and their biases."""
    return 3 * hidden * inter + 2 * inter + hidden


def _unpadded(hardware: HardwareProfile) -> HardwareProfile:
    """The same GPU without a CUDA compute capability: no backend is chosen, the experts keep the checkpoint's shape
    (as every GPU had them before the padding was modelled)."""
    return hardware.model_copy(update={"cuda_compute_capability": None})


@pytest.mark.parametrize("preset", GPT_OSS)
@pytest.mark.parametrize(
    ("gpu", "hidden", "inter"),
    [
        ("H100-SXM5-80GB", 2880, 2880),  # Triton (vLLM 0.15.1 on Hopper): 2880 is 45 x 64, nothing added
        ("A100-SXM4-80GB", 3072, 2944),  # Marlin
        ("B200-SXM-180GB", 3072, 3072),  # FlashInfer's TRT-LLM kernel, both to 256 under 0.15.1
    ],
)
def test_gpt_oss_on_one_gpu_holds_its_experts_padded(preset: str, gpu: str, hidden: int, inter: int) -> None:
    """One GPU holds the checkpoint and, for every expert of every MoE layer, what padding adds (the modelled
    default vLLM, 0.15.1): gpt-oss-120b 65.19 GB on H100, 70.70 on A100, 73.58 on B200; -20b 13.75, 14.67, 15.15."""
    layers, experts = GPT_OSS[preset]
    padded = layers * experts * (_expert(hidden, inter) - _expert(2880, 2880))
    deployment = Deployment(load_model(preset), load_hardware(gpu), 1, "mxfp4")
    assert stage_weight_bytes(deployment) == [CHECKPOINT[preset] + padded * MXFP4_BYTES]


def test_the_written_out_figures_of_gpt_oss_120b_on_one_gpu() -> None:
    spec, gpus = load_model("gpt-oss-120b"), ("H100-SXM5-80GB", "A100-SXM4-80GB", "B200-SXM-180GB")
    on = {gpu: stage_weight_bytes(Deployment(spec, load_hardware(gpu), 1, "mxfp4")) for gpu in gpus}
    assert on == {
        "H100-SXM5-80GB": [65_190_335_616],  # unchanged
        "A100-SXM4-80GB": [65_190_335_616 + PADDED_BYTES],  # 70,695,946,368
        "B200-SXM-180GB": [73_584_351_360],  # + 36 x 128 x 3,428,928 x 17/32
    }


def test_the_padding_follows_the_release_and_each_gpus_slice() -> None:
    """B200 at TP=8: each GPU's 360 of the intermediate size goes to 512 under vLLM 0.15.1 (a multiple of 256:
    +42% of expert bytes), to 384 from 0.27 (128). H100 under 0.11 (Marlin): 3072 x 2944 as on A100; at TP=2
    under 0.15.1 (Triton) 1440 -> 1472. With expert parallelism a GPU holds whole padded experts."""
    spec, b200, h100 = load_model("gpt-oss-120b"), load_hardware("B200-SXM-180GB"), load_hardware("H100-SXM5-80GB")
    routed = 36 * 128 * MXFP4_BYTES
    rest = CHECKPOINT["gpt-oss-120b"] - routed * _expert(2880, 2880)

    def per_gpu(tp: int, hidden: int, inter: int) -> int:
        """One GPU's share at TP=tp, each GPU's slice of the intermediate size padded to `inter`."""
        return math.ceil((rest + routed * _expert(hidden, tp * inter)) / tp)

    assert stage_weight_bytes(Deployment(spec, b200, 8, "mxfp4", vllm_version="0.15.1")) == [per_gpu(8, 3072, 512)]
    assert stage_weight_bytes(Deployment(spec, b200, 8, "mxfp4", vllm_version="0.27")) == [per_gpu(8, 3072, 384)]
    assert stage_weight_bytes(Deployment(spec, h100, 1, "mxfp4", vllm_version="0.11")) == [per_gpu(1, 3072, 2944)]
    assert stage_weight_bytes(Deployment(spec, h100, 2, "mxfp4", vllm_version="0.15.1")) == [per_gpu(2, 2880, 1472)]
    ep = Deployment(spec, load_hardware("A100-SXM4-80GB"), 4, "mxfp4", expert_parallel=True)
    unpadded = Deployment(spec, _unpadded(load_hardware("A100-SXM4-80GB")), 4, "mxfp4", expert_parallel=True)
    whole = 36 * 32 * (_expert(3072, 2944) - _expert(2880, 2880)) * MXFP4_BYTES  # 32 experts a GPU, x 36 layers
    assert stage_weight_bytes(ep)[0] - stage_weight_bytes(unpadded)[0] == pytest.approx(whole, abs=1)


def test_only_mxfp4_experts_on_a_cuda_gpu_are_padded() -> None:
    """gpt-oss served from bf16 weights, a dense model in MXFP4 and a CPU host keep the checkpoint's shape."""
    a100, spec = load_hardware("A100-SXM4-80GB"), load_model("gpt-oss-20b")
    assert Deployment(spec, a100, 1, "bf16").expert_padding == NO_PADDING
    assert Deployment(load_model("Llama-3.1-8B"), a100, 1, "mxfp4").expert_padding == NO_PADDING
    assert Deployment(spec, load_hardware("CPU-host"), 1, "mxfp4").expert_padding == NO_PADDING
    assert Deployment(spec, a100, 1, "mxfp4").expert_padding == MARLIN_PADDING


def test_the_padding_comes_out_of_the_kv_cache_on_one_a100() -> None:
    """Same GPU, same settings: the weights grow by the padded bytes and the KV cache shrinks by as many, from 8,873
    blocks of 16 tokens to 4,206 (a block: 16 tokens x 36 layers x 8 KV heads x 64 x 2 (K, V) x 2 bytes; two
    KV-cache groups of 18 layers, perf/kv_groups.py)."""
    model, a100 = load_model("gpt-oss-120b"), load_hardware("A100-SXM4-80GB")
    padded = plan_memory(Deployment(model, a100, 1, "mxfp4"), MemorySettings())
    checkpoint = plan_memory(Deployment(model, _unpadded(a100), 1, "mxfp4"), MemorySettings())
    assert padded.weight_bytes - checkpoint.weight_bytes == PADDED_BYTES
    assert checkpoint.kv_cache_bytes - padded.kv_cache_bytes == PADDED_BYTES
    assert (checkpoint.num_blocks, padded.num_blocks) == (8873, 4206)
    assert padded.num_blocks == padded.kv_cache_bytes // (16 * 36 * 8 * 64 * 2 * 2)


def test_h100_keeps_the_checkpoints_shape_at_one_gpu() -> None:
    """vLLM 0.15.1 runs Triton's matmul_ogs on Hopper, which pads the intermediate size to 64: 2880 already is."""
    model, h100 = load_model("gpt-oss-120b"), load_hardware("H100-SXM5-80GB")
    padded = plan_memory(Deployment(model, h100, 1, "mxfp4"), MemorySettings())
    assert padded == plan_memory(Deployment(model, _unpadded(h100), 1, "mxfp4"), MemorySettings())


def test_the_moe_kernel_runs_over_the_padded_shape() -> None:
    """Marlin's problem is the padded one (hidden states padded with zeros to 3072): the fused kernel's shape is
    3072 x 2944 on one GPU, 3072 x 1536 at TP=2, whole 3072 x 2944 experts with expert parallelism, and its
    weight reads grow with it."""
    model, a100 = load_model("gpt-oss-120b"), load_hardware("A100-SXM4-80GB")
    costs = RooflineCosts(a100)
    ffn = FfnCosts(model, 1, costs, "bf16", 2.0, MXFP4_BYTES, MARLIN_PADDING)
    assert ffn.experts == MoeShape(128, 4, 3072, 2944, MXFP4_BYTES, "bf16")
    assert FfnCosts(model, 2, costs, "bf16", 2.0, MXFP4_BYTES, MARLIN_PADDING).experts.inter == 1536
    unpadded = FfnCosts(model, 1, costs, "bf16", 2.0, MXFP4_BYTES)
    assert unpadded.experts == MoeShape(128, 4, 2880, 2880, MXFP4_BYTES, "bf16")
    assert ffn.layer_s(8) > unpadded.layer_s(8)
    ffn.expert_parallel(4, 4, a100)
    assert ffn.experts == MoeShape(32, 4, 3072, 2944, MXFP4_BYTES, "bf16")


def test_a_decode_step_on_a100_reads_the_padded_experts() -> None:
    """The iteration model takes the deployment's padding: a 64-sequence decode step's MoE time on one A100 is
    that of Marlin's padded shape, longer than the checkpoint's; nothing else changes."""
    model, a100 = load_model("gpt-oss-120b"), load_hardware("A100-SXM4-80GB")
    shape = BatchShape(num_decode_seqs=64, decode_kv_tokens=64 * 1100, num_sampled=64)
    padded = IterationModel(Deployment(model, a100, 1, "mxfp4")).timing(shape).breakdown
    checkpoint = IterationModel(Deployment(model, _unpadded(a100), 1, "mxfp4")).timing(shape).breakdown
    assert padded["moe"] > checkpoint["moe"]
    assert {name: time for name, time in padded.items() if name != "moe"} == {
        name: time for name, time in checkpoint.items() if name != "moe"
    }
