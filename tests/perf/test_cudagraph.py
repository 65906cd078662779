"""CUDA-graph dispatch and host-time overlap: small cases computed by hand from vLLM 0.15.1's rules."""

from __future__ import annotations

import pytest

from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.cudagraph import GraphDispatch, capture_sizes
from ttftsim.perf.iteration import PIECEWISE_HOST_SHARE, Deployment, IterationModel


def _model(tp: int = 4, capture: int = 256, seqs: int | None = 128, is_async: bool = False) -> IterationModel:
    spec, hw = load_model("Llama-3.1-70B"), load_hardware("H100-SXM5-80GB")
    return IterationModel(
        Deployment(spec, hw, tp, cudagraph_sizes=capture_sizes(capture), max_num_seqs=seqs, async_scheduling=is_async)
    )


def _decode(seqs: int, context: int = 900) -> BatchShape:
    return BatchShape(num_decode_seqs=seqs, decode_kv_tokens=seqs * context, num_sampled=seqs)


def test_capture_sizes_are_vllm_defaults() -> None:
    """config/vllm.py _set_cudagraph_sizes: 1, 2, 4, multiples of 8 below 256, multiples of 16 to the cap."""
    sizes = capture_sizes(512)
    assert sizes[:5] == (1, 2, 4, 8, 16)
    assert sizes[33:37] == (248, 256, 272, 288)
    assert sizes[-1] == 512 and len(sizes) == 3 + 31 + 17
    assert capture_sizes(100)[-1] == 96  # the cap is truncated to the grid
    assert capture_sizes(3) == (1, 2)
    assert capture_sizes(0) == ()


def test_dispatch_pads_to_next_capture_size_and_picks_the_graph() -> None:
    graphs = GraphDispatch.of(256, max_num_seqs=128)
    assert [graphs.padded_tokens(n) for n in (1, 3, 5, 37, 249, 256, 257)] == [1, 4, 8, 40, 256, 256, 257]
    assert graphs.mode(37, is_uniform_decode=True) == "full"
    assert graphs.mode(37, is_uniform_decode=False) == "piecewise"
    assert graphs.mode(127, is_uniform_decode=True) == "full"  # pads to 128 = max_num_seqs
    assert graphs.mode(129, is_uniform_decode=True) == "piecewise"  # pads to 136: no FULL graph that large
    assert graphs.mode(257, is_uniform_decode=False) == "eager"
    eager = GraphDispatch.of(0, max_num_seqs=128)
    assert eager.mode(1, is_uniform_decode=True) == "eager" and eager.padded_tokens(37) == 37


def test_decode_runs_captured_kernels_at_padded_size_and_attention_at_real_size() -> None:
    model = _model()
    real, padded = model.timing(_decode(37)), model.timing(_decode(40))
    assert real.num_padded_tokens == 40 and real.graph_mode == "full"
    for name in ("qkv_proj", "o_proj", "mlp", "norms_elementwise", "allreduce"):
        assert real.breakdown[name] == padded.breakdown[name], name
    assert real.breakdown["decode_attention"] < padded.breakdown["decode_attention"]
    assert real.breakdown["lm_head"] < padded.breakdown["lm_head"]  # outside the graph: sampled rows only
    eager = _model(capture=0).timing(_decode(37))
    assert eager.num_padded_tokens == 37 and eager.breakdown["mlp"] < real.breakdown["mlp"]


def test_host_time_is_full_piecewise_or_eager() -> None:
    model = _model()
    full, eager = 0.0012, 0.003  # the H100 profile's graph and eager host times
    piecewise = full + 0.25 * (eager - full)  # 1.65 ms
    assert PIECEWISE_HOST_SHARE == 0.25
    assert model.overhead_s(_decode(37)) == full
    mixed = BatchShape.from_sequences([16] + [1] * 10, [0] + [500] * 10)  # 26 tokens: piecewise graphs
    assert model.overhead_s(mixed) == pytest.approx(piecewise)
    assert model.timing(mixed).num_padded_tokens == 32
    assert model.overhead_s(BatchShape.from_sequences([1024], [0])) == eager  # above the 256-token cap
    assert model.overhead_s(BatchShape.from_sequences([1, 1], [0, 0])) == full  # 1-token prompts are uniform
    assert _model(capture=0).overhead_s(_decode(37)) == eager  # enforce_eager


def test_async_scheduling_overlaps_host_time_with_device_time() -> None:
    shape = _decode(37)
    sync, overlapped = _model().timing(shape), _model(is_async=True).timing(shape)
    device = sync.total_s - sync.host_s
    assert sync.breakdown["overhead"] == sync.host_s == 0.0012 and sync.hidden_host_s == 0.0
    assert overlapped.total_s == device == _model(is_async=True).time_s(shape)
    assert overlapped.breakdown["overhead"] == 0.0 and overlapped.hidden_host_s == 0.0012
    assert sum(overlapped.breakdown.values()) == pytest.approx(overlapped.total_s)


def test_async_step_takes_the_host_time_when_it_exceeds_the_device_time() -> None:
    spec, hw = load_model("Llama-3.1-8B"), load_hardware("H100-SXM5-80GB")
    slow_host = Deployment(spec, hw, decode_graph_iteration_s=0.1, async_scheduling=True)
    timing = IterationModel(slow_host).timing(_decode(4))
    assert timing.total_s == 0.1
    assert timing.hidden_host_s == pytest.approx(0.1 - timing.breakdown["overhead"])
    assert 0.0 < timing.hidden_host_s < 0.02  # the device time, hidden under the host time


def test_cpu_hosts_have_no_cuda_graphs() -> None:
    model = IterationModel(Deployment(load_model("Llama-3.1-8B"), load_hardware("cpu-host")))
    assert model.graph_mode(_decode(3)) == "eager"
    assert model.timing(_decode(3)).num_padded_tokens == 3


def test_dispatch_in_each_cudagraph_mode() -> None:
    """CudagraphDispatcher.dispatch by mode, over the sizes up to 64 with max_num_seqs 16: FULL decode graphs of
    their own up to 16 in FULL_DECODE_ONLY and FULL_AND_PIECEWISE; FULL replays a FULL graph for every batch;
    a batch that replays nothing is not padded."""
    sizes = capture_sizes(64)
    decode_only = GraphDispatch.of_sizes(sizes, "FULL_DECODE_ONLY", max_num_seqs=16)
    assert decode_only.mode(13, is_uniform_decode=True) == "full" and decode_only.padded_tokens(13, True) == 16
    assert decode_only.mode(13, is_uniform_decode=False) == "eager" and decode_only.padded_tokens(13, False) == 13
    assert decode_only.mode(17, is_uniform_decode=True) == "eager" and decode_only.padded_tokens(17, True) == 17
    piecewise = GraphDispatch.of_sizes(sizes, "PIECEWISE", max_num_seqs=16)
    assert piecewise.mode(13, is_uniform_decode=True) == "piecewise" and piecewise.padded_tokens(13, True) == 16
    assert piecewise.mode(65, is_uniform_decode=False) == "eager"
    full = GraphDispatch.of_sizes(sizes, "FULL", max_num_seqs=16)
    assert full.mode(13, is_uniform_decode=False) == "full" and full.mode(40, is_uniform_decode=True) == "full"
    assert full.padded_tokens(33, False) == 40
    none = GraphDispatch.of_sizes(sizes, "NONE", max_num_seqs=16)
    assert none.mode(1, is_uniform_decode=True) == "eager" and none.padded_tokens(13, True) == 13
    both = GraphDispatch.of_sizes(sizes, "FULL_AND_PIECEWISE", max_num_seqs=16)
    assert both == GraphDispatch.of(64, max_num_seqs=16)


def test_a_mixed_step_without_piecewise_graphs_runs_eagerly_and_unpadded() -> None:
    """FULL_DECODE_ONLY: a 26-token mixed batch pays the eager host time on its own 26 tokens; the uniform decode
    batch still replays its FULL graph, as in FULL_AND_PIECEWISE."""
    spec, hw = load_model("Llama-3.1-70B"), load_hardware("H100-SXM5-80GB")
    both = IterationModel(Deployment(spec, hw, 4, max_num_seqs=128, cudagraph_sizes=capture_sizes(256)))
    decode_only = IterationModel(
        Deployment(spec, hw, 4, max_num_seqs=128, cudagraph_sizes=capture_sizes(256), cudagraph_mode="FULL_DECODE_ONLY")
    )
    mixed = BatchShape.from_sequences([16] + [1] * 10, [0] + [500] * 10)
    timing = decode_only.timing(mixed)
    assert (timing.num_padded_tokens, timing.graph_mode) == (26, "eager")
    assert decode_only.overhead_s(mixed) == 0.003 and both.overhead_s(mixed) == pytest.approx(0.00165)
    assert decode_only.timing(_decode(37)) == both.timing(_decode(37))
