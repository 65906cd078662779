"""Fused MoE cost: one grouped kernel pair over the experts hit (vLLM fused_experts), checked by hand and
against the AIConfigurator measurement of Mixtral-8x7B's experts at TP2 (calibrated fit)."""

from __future__ import annotations

import pytest

from ttftsim.calibration.costs import CalibratedCosts
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.kernels import MoeShape, RooflineCosts

MIXTRAL_TP2 = MoeShape(num_experts=8, top_k=2, hidden=4096, inter=14336 // 2, weight_bytes=2.0, dtype="bf16")


def test_experts_hit_under_random_top_k_routing() -> None:
    assert MIXTRAL_TP2.experts_hit(1) == 2.0
    assert MIXTRAL_TP2.experts_hit(2) == pytest.approx(8 * (1 - 0.75**2))  # 3.5
    assert MIXTRAL_TP2.experts_hit(64) == pytest.approx(8.0)


def test_roofline_moe_reads_each_hit_experts_weights_once() -> None:
    """Decode is weight-bound: 2 experts x 3 x 7168 x 4096 x 2 B = 352 MB at 3.35 TB/s x 0.88 = 119.5 us,
    plus six memory latencies of 9 MB / 2.948 TB/s = 3.05 us (two GEMMs, top-k, align, SiLU-mul, sum)."""
    costs = RooflineCosts(load_hardware("H100-SXM5-80GB"))
    assert costs.moe_s(1, 2.0, MIXTRAL_TP2) == pytest.approx(119.5e-6 + 6 * 3.05e-6, rel=0.01)
    all_experts = costs.moe_s(64, 8.0, MIXTRAL_TP2)  # four times the weights, one launch each still
    assert all_experts == pytest.approx(4 * 119.5e-6 + 6 * 3.05e-6, rel=0.02)
    assert costs.moe_s(0, 0.0, MIXTRAL_TP2) == 0.0


@pytest.mark.parametrize(
    ("tokens", "measured_s"), [(1, 0.149e-3), (64, 0.5047e-3), (2048, 1.2997e-3), (8192, 4.9398e-3)]
)
def test_calibrated_moe_matches_aiconfigurator_mixtral_tp2(tokens: int, measured_s: float) -> None:
    """SGLang 0.5.10 Triton fused_moe, bf16, balanced routing (min(8, 2 x tokens) experts hit), H100."""
    costs = CalibratedCosts.load(load_hardware("H100-SXM5-80GB"))
    assert costs is not None
    assert costs.moe_s(tokens, min(8.0, 2.0 * tokens), MIXTRAL_TP2) == pytest.approx(measured_s, rel=0.05)


def test_iteration_moe_is_router_gemm_plus_fused_experts() -> None:
    spec, hw = load_model("Mixtral-8x7B-v0.1"), load_hardware("H100-SXM5-80GB")
    model = IterationModel(Deployment(spec, hw, 2))
    for seqs in (1, 16, 64):
        shape = BatchShape(num_decode_seqs=seqs, decode_kv_tokens=seqs * 100, num_sampled=seqs)
        router = model.costs.gemm_s(seqs, 8, 4096, "bf16", 8 * 4096 * 2.0)
        fused = model.costs.moe_s(seqs, MIXTRAL_TP2.experts_hit(seqs), MIXTRAL_TP2)
        assert model.timing(shape).breakdown["moe"] == pytest.approx(spec.num_hidden_layers * (router + fused))
