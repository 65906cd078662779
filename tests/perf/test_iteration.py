"""Iteration-time model: closed-form checks on the roofline."""

from __future__ import annotations

import numpy as np
import pytest

from ttftsim.calibration.costs import CalibratedCosts
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.model.size import weight_bytes
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.flops import prefill_flops
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.kernels import RooflineCosts


def _model(name: str = "Llama-3.1-8B", hw: str = "H100-SXM5-80GB", tp: int = 1) -> IterationModel:
    return IterationModel(Deployment(load_model(name), load_hardware(hw), tp))


def test_prefill_of_5000_tokens_on_70b_is_about_7e14_flops() -> None:
    assert prefill_flops(load_model("Llama-3.1-70B"), 5000) == pytest.approx(7e14, rel=0.05)


def test_batch_one_decode_is_memory_bound_and_2048_prefill_compute_bound_on_h100() -> None:
    spec, hw = load_model("Llama-3.1-70B"), load_hardware("H100-SXM5-80GB")
    costs = RooflineCosts(hw)
    h, inter = spec.hidden_size, spec.intermediate_size
    for m, regime in ((1, "memory"), (2048, "compute")):
        assert costs.gemm_regime(m, 2 * inter, h, "bf16", 2 * inter * h * 2.0) == regime
        assert costs.gemm_regime(m, h, inter, "bf16", inter * h * 2.0) == regime


def test_batch_one_decode_time_is_weights_over_bandwidth() -> None:
    model = _model()
    hw = model.deployment.hardware
    shape = BatchShape.from_sequences([1], [100])
    streamed = weight_bytes(model.deployment.model, "bf16") / (hw.mem_bw_bytes_per_s * hw.roofline.mem_bw_efficiency)
    compute_free = model.time_s(shape) - model.overhead_s(shape)
    assert streamed < compute_free < 1.25 * streamed


def test_long_prefill_time_approaches_flops_over_achieved_peak() -> None:
    model = _model()
    hw = model.deployment.hardware
    shape = BatchShape.from_sequences([8192], [0])
    ideal = prefill_flops(model.deployment.model, 8192) / hw.peak_flops.bf16
    assert ideal / hw.roofline.gemm_max_efficiency < model.time_s(shape) < 2.0 * ideal / hw.roofline.gemm_max_efficiency


def test_breakdown_sums_to_total_and_names_operators() -> None:
    model = _model("Llama-3.1-70B", tp=4)
    timing = model.timing(BatchShape.from_sequences([512, 1, 1], [0, 300, 700], num_sampled=3))
    assert sum(timing.breakdown.values()) == pytest.approx(timing.total_s)
    assert timing.total_s == pytest.approx(model.time_s(BatchShape.from_sequences([512, 1, 1], [0, 300, 700])))
    for name in ("qkv_proj", "o_proj", "mlp", "prefill_attention", "decode_attention", "allreduce", "lm_head"):
        assert timing.breakdown[name] > 0, name


def test_tp_all_reduce_costs_more_over_pcie_than_nvlink() -> None:
    shape = BatchShape.from_sequences([2048], [0])
    nvlink = _model("Llama-3.1-8B", "H100-SXM5-80GB", 2).timing(shape).breakdown["allreduce"]
    pcie = _model("Llama-3.1-8B", "H100-PCIe-80GB", 2).timing(shape).breakdown["allreduce"]
    assert pcie > 5 * nvlink
    assert _model().timing(shape).breakdown["allreduce"] == 0.0


def test_moe_reads_only_the_experts_hit() -> None:
    model = _model("Mixtral-8x7B-v0.1", "H100-SXM5-80GB", 2)
    one = model.timing(BatchShape.from_sequences([1], [10])).breakdown["moe"]
    many = model.timing(BatchShape.from_sequences([1] * 64, [10] * 64)).breakdown["moe"]
    assert 2.5 < many / one < 4.5  # 2 of 8 experts at batch 1, all 8 at batch 64


def test_lm_head_only_for_sampled_tokens() -> None:
    model = _model()
    chunk = model.timing(BatchShape.from_sequences([1024], [0], num_sampled=0)).breakdown["lm_head"]
    final = model.timing(BatchShape.from_sequences([1024], [0], num_sampled=1)).breakdown["lm_head"]
    assert chunk == 0.0 < final


def test_decode_run_equals_stepwise_times() -> None:
    model = _model("Llama-3.1-70B", tp=4)
    run = model.decode_run_s(num_seqs=7, kv_tokens=7 * 900, steps=50)
    stepwise = [
        model.time_s(BatchShape(num_decode_seqs=7, decode_kv_tokens=7 * 900 + 7 * j, num_sampled=7)) for j in range(50)
    ]
    np.testing.assert_allclose(run, stepwise, rtol=1e-12)


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("calibrated", [False, True])
def test_decode_step_function_is_time_s_bit_for_bit(calibrated: bool, is_async: bool) -> None:
    """The per-run step function short decode runs use gives exactly time_s (stepping and runs agree)."""
    hw = load_hardware("H100-SXM5-80GB")
    costs = CalibratedCosts.load(hw) if calibrated else None
    assert (costs is not None) == calibrated
    model = IterationModel(Deployment(load_model("Llama-3.1-8B"), hw, async_scheduling=is_async), costs)
    for seqs in (1, 7, 37, 600):  # 37: padded to 40; 600: beyond the CUDA-graph capture size
        step_s = model.decode_step_s(seqs)
        for kv_tokens in (seqs, seqs * 900 + 3, seqs * 30_000):
            shape = BatchShape(num_decode_seqs=seqs, decode_kv_tokens=kv_tokens, num_sampled=seqs)
            assert step_s(kv_tokens) == model.time_s(shape)


def test_cuda_graph_overhead_full_for_decode_piecewise_for_small_mixed_eager_above_the_cap() -> None:
    model = _model()
    hw = model.deployment.hardware
    graph, eager = hw.overhead.decode_graph_iteration_s, hw.overhead.iteration_s
    assert model.overhead_s(BatchShape.from_sequences([1], [5])) == graph
    assert model.overhead_s(BatchShape.from_sequences([1] * 513, [5] * 513)) == eager
    assert graph < model.overhead_s(BatchShape.from_sequences([10], [0])) < eager  # piecewise graphs


@pytest.mark.parametrize("is_async", [False, True])
def test_decode_run_equals_stepwise_times_with_and_without_async_scheduling(is_async: bool) -> None:
    spec, hw = load_model("Llama-3.1-70B"), load_hardware("H100-SXM5-80GB")
    for overhead_s in (None, 0.05):  # 50 ms: host time above the device time, the async step takes it
        model = IterationModel(Deployment(spec, hw, 4, decode_graph_iteration_s=overhead_s, async_scheduling=is_async))
        # the last: contexts near 2**53, as far as doubles hold integers
        for seqs, context in ((7, 900), (37, 900), (600, 900), (3, 2**50 + 1)):
            run = model.decode_run_s(num_seqs=seqs, kv_tokens=seqs * context, steps=20)
            shapes = [
                BatchShape(num_decode_seqs=seqs, decode_kv_tokens=seqs * (context + j), num_sampled=seqs)
                for j in range(20)
            ]
            assert list(run) == [model.time_s(shape) for shape in shapes]
            step_s = model.decode_step_s(seqs)
            assert [step_s(shape.decode_kv_tokens) for shape in shapes] == list(run)
            assert [model.timing(shape).total_s for shape in shapes] == pytest.approx(list(run), rel=1e-12)


def test_a_decode_run_of_no_sequences_times_every_step_alike() -> None:
    """No decoding sequence (a cost model's edge, not a run the engine makes): every step reads the same context."""
    model = _model("Llama-3.1-70B", tp=4)
    run = model.decode_run_s(num_seqs=0, kv_tokens=100, steps=3)
    assert len(run) == 3 and run[0] == run[1] == run[2] == model.decode_run_s(num_seqs=0, kv_tokens=100, steps=1)[0]


def test_tp_must_divide_heads() -> None:
    with pytest.raises(ValueError, match="does not divide"):
        Deployment(load_model("Llama-3.1-70B"), load_hardware("H100-SXM5-80GB"), 3)
