"""Expert parallelism (vLLM --enable-expert-parallel): whole experts per GPU, the busiest GPU's experts and
picks, the all-to-all of data-parallel ranks; by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ttftsim.config.engine import EngineArgs
from ttftsim.config.scenario import Scenario
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.model.size import param_count
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.ffn import all2all_bytes_per_token, busiest_rank_picks, local_experts
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.kernels import MoeShape, RooflineCosts
from ttftsim.perf.memory import stage_weight_bytes
from ttftsim.replica import build_replica
from ttftsim.validate.vllm_command import read_vllm_container


@pytest.mark.parametrize(("experts", "ep", "busiest"), [(256, 8, 32), (60, 8, 8), (8, 2, 4), (60, 16, 4), (64, 64, 1)])
def test_the_busiest_gpu_holds_the_remainder_expert(experts: int, ep: int, busiest: int) -> None:
    """vLLM determine_expert_map: E // ep each, the first E mod ep ranks one more."""
    assert local_experts(experts, ep) == busiest


def test_expert_parallel_weights_per_gpu_by_hand() -> None:
    """Qwen1.5-MoE-A2.7B bf16 on 8 GPUs: 60 experts of 3 x 2,048 x 1,408 x 2 = 17,301,504 bytes on 24 layers.
    TP slices every expert eight ways (7.5 experts' worth a GPU); EP puts 8 whole experts on the busiest GPU:
    24 x 0.5 x 17,301,504 = 207,618,048 bytes more there."""
    spec, hw = load_model("Qwen1.5-MoE-A2.7B"), load_hardware("H200-SXM-141GB")
    total, expert = 2 * param_count(spec), 3 * 2048 * 1408 * 2
    (tp,) = stage_weight_bytes(Deployment(spec, hw, 8))
    (ep,) = stage_weight_bytes(Deployment(spec, hw, 8, expert_parallel=True))
    assert tp == math.ceil(total / 8)
    assert ep == math.ceil((total - 24 * 60 * expert) / 8 + 24 * 8 * expert)
    assert ep - tp == 207_618_048


def test_expert_parallel_changes_no_bytes_when_the_experts_divide() -> None:
    spec, hw = load_model("DeepSeek-V3"), load_hardware("H200-SXM-141GB")
    tp = stage_weight_bytes(Deployment(spec, hw, 8, "fp8"))
    assert stage_weight_bytes(Deployment(spec, hw, 8, "fp8", expert_parallel=True)) == tp == [84_123_399_936]


def test_busiest_rank_picks_by_hand() -> None:
    """128 picks over 2 GPUs: mean 64, sigma sqrt(128 x 0.5 x 0.5) = 5.657, Blom's expected maximum of two
    standard normals inv_cdf(1.625 / 2.25) = 0.5895: 67.33. One GPU takes them all."""
    assert busiest_rank_picks(128, 2, 0.5) == pytest.approx(64 + 5.656854 * 0.589456, rel=1e-5)
    assert busiest_rank_picks(128, 2, 0.5) == pytest.approx(67.33, abs=0.01)
    assert busiest_rank_picks(128, 1, 1.0) == 128.0
    assert busiest_rank_picks(2, 64, 0.9) == 2.0  # never more than every pick


def test_a_measured_expert_load_imbalance_sets_the_busiest_gpus_picks() -> None:
    """expert_load_imbalance 1.5 (vLLM EPLB balancedness 0.67): 1,000 picks over 8 GPUs, mean 125, busiest 187.5;
    never more than every pick. The fused-MoE time of Mixtral TP 2 x DP 4 with EP grows with it, its all-to-all
    does not."""
    assert busiest_rank_picks(1000, 8, 1 / 8, 1.5) == 187.5
    assert busiest_rank_picks(1000, 8, 1 / 8, 10.0) == 1000.0
    hw, mixtral = load_hardware("H100-SXM5-80GB"), load_model("Mixtral-8x7B-v0.1")
    shape = BatchShape(num_decode_seqs=256, decode_kv_tokens=256_000, num_sampled=256)

    def parts(imbalance: float | None) -> dict[str, float]:
        deployment = Deployment(mixtral, hw, 2, expert_parallel=True, dp=4, expert_load_imbalance=imbalance)
        return IterationModel(deployment).timing(shape).breakdown

    random, skewed = parts(None), parts(2.0)
    assert skewed["moe"] > random["moe"] and skewed["all2all"] == random["all2all"]
    with pytest.raises(ValueError, match="expert_load_imbalance without enable_expert_parallel"):
        Deployment(mixtral, hw, 2, expert_load_imbalance=1.5)
    with pytest.raises(ValueError, match="expert_load_imbalance without enable_expert_parallel"):
        EngineArgs(expert_load_imbalance=1.5)


def test_expert_parallel_moe_runs_the_busiest_gpus_experts_at_full_width() -> None:
    """Mixtral-8x7B on 2 GPUs with EP, 64 decode tokens: each GPU holds 4 whole experts (14,336 wide); the
    busiest GPU gets 67.33 of the 128 picks, run as ceil(67.33 / 2) = 34 tokens over the 4 experts hit
    (4 x (1 - (1 - 2/8)^64)), after the router over all 64 tokens; 32 layers."""
    hw = load_hardware("H100-SXM5-80GB")
    model = IterationModel(Deployment(load_model("Mixtral-8x7B-v0.1"), hw, 2, expert_parallel=True))
    roof = RooflineCosts(hw)
    router = roof.gemm_s(64, 8, 4096, "bf16", 8 * 4096 * 2.0)
    experts = roof.moe_s(34, 4 * (1 - 0.75**64), MoeShape(4, 2, 4096, 14336, 2.0, "bf16"))
    breakdown = model.timing(BatchShape(num_decode_seqs=64, decode_kv_tokens=64_000, num_sampled=64)).breakdown
    assert breakdown["moe"] == pytest.approx(32 * (router + experts))
    assert "all2all" not in breakdown  # one DP rank: the layer's all-reduce as with TP


def test_all2all_bytes_per_token_by_hand() -> None:
    """DeepSeek-V3 on 8 DP ranks (vLLM's allgather_reducescatter): a token's rank receives the 7 others'
    hidden states (7,168 x 2 bytes) and router logits (256 x 2), and sends 7 shares of 7,168 x 2 back."""
    assert all2all_bytes_per_token(7168, 256, 8) == (7 * (7168 + 256) * 2, 7 * 7168 * 2) == (103_936, 100_352)
    assert all2all_bytes_per_token(7168, 256, 1) == (0, 0)


def test_all2all_time_of_data_parallel_ranks() -> None:
    """DeepSeek-V3, TP 1 x DP 8 with EP on one H200 node: per MoE layer 2 NVLink latencies and 64 tokens x
    204,288 bytes at the link's all-reduce efficiency; 58 MoE layers."""
    hw = load_hardware("H200-SXM-141GB")
    model = IterationModel(Deployment(load_model("DeepSeek-V3"), hw, 1, "fp8", expert_parallel=True, dp=8))
    link = hw.intra_node_link
    per_layer = 2 * link.latency_s + 64 * 204_288 / (link.bw_bytes_per_s * hw.roofline.link_efficiency)
    breakdown = model.timing(BatchShape(num_decode_seqs=64, decode_kv_tokens=64_000, num_sampled=64)).breakdown
    assert breakdown["all2all"] == pytest.approx(58 * per_layer)


def _scenario(model: str, tp: int = 1) -> Scenario:
    return Scenario.model_validate(
        {
            "name": "expert parallel",
            "model": model,
            "hardware": "H100-SXM5-80GB",
            "engine": {"enable_expert_parallel": True, "tensor_parallel_size": tp},
            "workload": {
                "type": "synthetic",
                "arrivals": {"type": "poisson", "rate": 1},
                "prompt_tokens": {"type": "fixed", "value": 100},
                "output_tokens": {"type": "fixed", "value": 10},
                "duration_s": 1,
            },
        }
    )


def test_a_scenario_with_expert_parallel_sizes_whole_experts(tmp_path: Path) -> None:
    """Qwen1.5-MoE-A2.7B, engine.enable_expert_parallel on TP 4: 15 whole experts a GPU (60 / 4)."""
    replica = build_replica(_scenario("Qwen1.5-MoE-A2.7B", 4), tmp_path)
    assert replica.perf.deployment.ep_size == 4
    assert replica.memory is not None
    spec, expert = load_model("Qwen1.5-MoE-A2.7B"), 3 * 2048 * 1408 * 2
    assert replica.memory.weight_bytes == math.ceil((2 * param_count(spec) - 24 * 60 * expert) / 4 + 24 * 15 * expert)


def test_expert_parallel_without_experts_is_one_line_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"enable_expert_parallel needs an MoE model; Llama-3\.1-8B has no experts"):
        Deployment(load_model("Llama-3.1-8B"), load_hardware("H100-SXM5-80GB"), expert_parallel=True)
    with pytest.raises(InputError) as info:
        build_replica(_scenario("Llama-3.1-8B"), tmp_path)
    assert "enable_expert_parallel" in str(info.value) and "\n" not in str(info.value)


def test_validate_reads_enable_expert_parallel_and_data_parallel_size() -> None:
    """vLLM 0.15.1's command line: --enable-expert-parallel and --data-parallel-size become engine arguments."""
    words = ["vllm", "serve", "m", "--enable-expert-parallel", "--data-parallel-size", "2", "-tp", "4"]
    command = read_vllm_container(words, [], "0.15.1", "Deployment/x", "k8s.yaml")
    assert command.engine == {"enable_expert_parallel": True, "tensor_parallel_size": 4, "data_parallel_size": 2}
    assert command.not_modelled == []
