"""Fused-MoE kernel curves by the experts' weight format: the tables' bf16 and fp8 Triton rows and Marlin's
weight-only int4 rows are imported as three curves, and a layer's experts are timed by the curve of the kernel
their format runs (4-bit experts, int4 or MXFP4, by Marlin's w4a16)."""

from __future__ import annotations

import pandas as pd

from ttftsim.calibration.costs import CalibratedCosts, moe_curve
from ttftsim.calibration.tables import _moe
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.deployment import Deployment
from ttftsim.perf.iteration import IterationModel
from ttftsim.perf.kernels import MoeShape


def _row(dtype: str, kernel: str, ep: int = 1, distribution: str = "balanced") -> dict[str, object]:
    return {
        "moe_dtype": dtype,
        "kernel_source": kernel,
        "moe_ep_size": ep,
        "distribution": distribution,
        "num_tokens": 4,
        "topk": 8,
        "num_experts": 128,
        "hidden_size": 4096,
        "inter_size": 1536,
        "moe_tp_size": 2,
        "latency": 0.5,
    }


def test_the_tables_three_kernels_are_three_curves_and_the_rest_is_left_out() -> None:
    rows = [
        _row("bfloat16", "sglang_fused_moe_triton"),
        _row("fp8_block", "sglang_fused_moe_triton"),
        _row("int4_wo", "sglang_marlin_moe"),
        _row("int4_wo", "sglang_fused_moe_triton"),  # not the kernel vLLM runs 4-bit experts with
        _row("bfloat16", "sglang_fused_moe_triton", ep=2),
        _row("fp8_block", "sglang_fused_moe_triton", distribution="power_law_1.2"),
    ]
    imported = _moe(pd.DataFrame(rows))
    assert imported["dtype"].tolist() == ["bf16", "fp8", "int4"]
    assert imported[["hit", "inter", "seconds"]].iloc[0].tolist() == [32, 768, 0.0005]


def test_a_layers_experts_take_the_curve_of_their_formats_kernel() -> None:
    assert moe_curve(MoeShape(128, 4, 2880, 2880, 2.0, "bf16")) == "moe/bf16"
    assert moe_curve(MoeShape(128, 4, 2880, 2880, 1.0, "fp8")) == "moe/fp8"
    assert moe_curve(MoeShape(128, 4, 2880, 2880, 0.5 + 1 / 32, "bf16")) == "moe/int4"  # MXFP4
    assert moe_curve(MoeShape(128, 4, 2880, 2880, 0.5 + 2 / 128, "bf16")) == "moe/int4"


def test_gpt_oss_experts_in_mxfp4_run_at_their_bytes_on_h100() -> None:
    """gpt-oss-120b on 4 H100s at 64 decoding sequences: its 4-bit experts read a quarter of bf16's bytes, and the
    measured w4a16 kernel runs them at about a third of the bf16 kernel's time (the bf16 curve alone, used before,
    gave 0.91)."""
    model, h100 = load_model("gpt-oss-120b"), load_hardware("H100-SXM5-80GB")
    costs = CalibratedCosts.load(h100)
    assert costs is not None
    shape = BatchShape(num_decode_seqs=64, decode_kv_tokens=64 * 1100, num_sampled=64)
    moe = {
        dtype: IterationModel(Deployment(model, h100, 4, dtype), costs).timing(shape).breakdown["moe"]
        for dtype in ("mxfp4", "bf16")
    }
    assert 0.2 < moe["mxfp4"] / moe["bf16"] < 0.45


def test_h200_times_its_experts_with_h100s_curves_at_its_own_bandwidth() -> None:
    """H200 is H100's die with faster memory and no MoE table of its own: its profile lends H100's MoE curves
    (curves_from), evaluated with H200's peaks and bandwidth, while its own classes (GEMM, attention) stay its own.
    A decode-sized MoE layer (memory-bound) takes H100's time scaled by the bandwidth ratio at most; a prefill-sized
    one (compute-bound, the same peak) about H100's time."""
    h100 = CalibratedCosts.load(load_hardware("H100-SXM5-80GB"))
    h200_profile = load_hardware("H200-SXM-141GB")
    h200 = CalibratedCosts.load(h200_profile)
    assert h100 is not None and h200 is not None
    assert h200_profile.curves_from is not None and h200_profile.curves_from.classes == ["moe"]
    assert {key for key in h200.fits if key.startswith("moe/")} == {"moe/bf16", "moe/fp8", "moe/int4"}
    assert h200.fits["moe/int4"]["params"] == h100.fits["moe/int4"]["params"]
    assert h200.fits["moe/int4"]["lent_from"] == "h100-sxm5-80gb.json"
    assert h200.fits["gemm/bf16"]["params"] != h100.fits["gemm/bf16"]["params"]  # its own table's
    shape = MoeShape(128, 4, 2880, 2880, 0.5 + 1 / 32, "bf16")  # gpt-oss-120b's experts in MXFP4
    decode, prefill = (
        h200.moe_s(t, min(128.0, 4.0 * t), shape) / h100.moe_s(t, min(128.0, 4.0 * t), shape) for t in (16, 8192)
    )
    bandwidth = h200_profile.mem_bw_bytes_per_s / load_hardware("H100-SXM5-80GB").mem_bw_bytes_per_s
    assert 1 / bandwidth <= decode < 0.9 and 0.95 < prefill <= 1.0
