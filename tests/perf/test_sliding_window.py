"""Sliding-window attention in the iteration-time model: pairs and keys by hand, layer kinds summed."""

from __future__ import annotations

import pytest

from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.attention import LayerKinds, windowed_sums
from ttftsim.perf.batch import BatchShape, window_pairs
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.kernels import AttentionShape, RooflineCosts

H100 = "H100-SXM5-80GB"


def _model(name: str, is_async: bool = False) -> IterationModel:
    return IterationModel(Deployment(load_model(name), load_hardware(H100), async_scheduling=is_async))


@pytest.mark.parametrize(
    ("new", "ctx", "window", "pairs"),
    [
        (3, 0, 4, 1 + 2 + 3),  # within the window: causal, n(n+1)/2
        (6, 0, 4, 1 + 2 + 3 + 4 + 4 + 4),  # crosses it: the last three see 4 keys each
        (4, 2, 4, 3 + 4 + 4 + 4),  # positions 2..5 see 3, 4, 4, 4 keys
        (3, 7, 4, 3 * 4),  # starts past the window: n x window
        (2048, 8192, 4096, 2048 * 4096),
        (8192, 0, 4096, 4096 * 4097 // 2 + 4096 * 4096),
    ],
)
def test_window_pairs_by_hand(new: int, ctx: int, window: int, pairs: int) -> None:
    assert window_pairs(new, ctx, window) == pairs


def test_builder_counts_each_sequence_within_the_window() -> None:
    """A 2048-token chunk after 8192 cached tokens and two decodes (9000 and 100 cached) under a 4096 window."""
    shape = BatchShape.from_sequences([2048, 1, 1], [8192, 9000, 100], window=4096)
    assert (shape.prefill_attn_pairs, shape.decode_kv_tokens) == (2048 * 8192 + 2048 * 2049 // 2, 9001 + 101)
    assert shape.prefill_window_pairs == 2048 * 4096
    assert shape.prefill_window_kv_tokens == 2048 + 4095  # the chunk and the 4095 tokens before its first query
    assert shape.decode_window_kv_tokens == 4096 + 101
    assert windowed_sums(shape, 4096) == (2048 * 4096, 6143, 4197)


def test_bounds_without_the_builder_sums() -> None:
    """A shape counted without the window: at most `window` pairs per query, window - 1 + n keys per prefill,
    `window` keys per decode; exact for the chunk past the window, above the exact 4096 + 101 for the decodes."""
    shape = BatchShape.from_sequences([2048, 1, 1], [8192, 9000, 100])
    assert windowed_sums(shape, 4096) == (2048 * 4096, 6143, min(9001 + 101, 2 * 4096))


def test_layer_kinds_of_the_presets() -> None:
    assert LayerKinds.of(load_model("Llama-3.1-8B")) == LayerKinds(32, 0, 0)
    assert LayerKinds.of(load_model("Mistral-7B-v0.1")) == LayerKinds(0, 32, 4096)
    assert LayerKinds.of(load_model("gpt-oss-20b")) == LayerKinds(12, 12, 128)
    assert LayerKinds.of(load_model("gemma-3-27b-pt")) == LayerKinds(10, 52, 1024)


def test_mistral_chunk_past_the_window_attends_to_4096_keys_per_query() -> None:
    """Mistral-7B-v0.1 (32 query heads of 128, 8 KV heads): a 2048-token chunk after 8192 tokens touches
    2048 x 4096 pairs per layer instead of 2048 x 8192 + 2048 x 2049 / 2, and reads 6143 keys."""
    model = _model("Mistral-7B-v0.1")
    costs = RooflineCosts(load_hardware(H100))
    shape = BatchShape.from_sequences([2048], [8192], window=4096)
    per_layer = costs.prefill_attention_s(2048, 2048 * 4096, 6143, AttentionShape(32, 8, 128, 2))
    assert model.timing(shape).breakdown["prefill_attention"] == 32 * per_layer
    # compute-bound: 2 x (32 x 256) multiply-adds x pairs at the attention FLOP rate
    hw = load_hardware(H100)
    flops = hw.peak_flops.bf16 * hw.roofline.attention_efficiency
    assert per_layer == 2.0 * 32 * 256 * 2048 * 4096 / flops


def test_gpt_oss_decode_reads_128_tokens_in_its_windowed_layers() -> None:
    """gpt-oss-20b (64 query heads, 8 KV heads of 64; 12 full and 12 windowed layers): one decode at 30,000
    cached tokens reads 30,001 x 2,048 bytes in a full layer and 128 x 2,048 in a windowed one."""
    model = _model("gpt-oss-20b")
    costs = RooflineCosts(load_hardware(H100))
    attention = AttentionShape(64, 8, 64, 2)
    assert attention.kv_bytes_per_token == 2048
    shape = BatchShape.from_sequences([1], [30_000], window=128)
    full, windowed = costs.decode_attention_s(1, 30_001, attention), costs.decode_attention_s(1, 128, attention)
    assert windowed == costs.memory_s(128 * 2048 + 2.0 * 64 * 128)  # memory-bound: the keys and q in, out out
    assert model.timing(shape).breakdown["decode_attention"] == 12 * full + 12 * windowed


def test_models_without_a_window_time_as_before() -> None:
    """Llama-3.1-8B on an H100, recorded before windows were modelled: a shape built with a window changes
    nothing for a model without one."""
    model = _model("Llama-3.1-8B")
    assert model.time_s(BatchShape.from_sequences([2048], [8192])) == 0.06925301887974097
    assert model.time_s(BatchShape.from_sequences([2048], [8192], window=4096)) == 0.06925301887974097
    assert model.time_s(BatchShape.from_sequences([1] * 64, [30000] * 64)) == 0.09280739610312076
    assert model.decode_step_s(32)(32 * 5000) == 0.014423088868385347


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize(("name", "context"), [("Mistral-7B-v0.1", 3900), ("gpt-oss-20b", 100)])
def test_windowed_decode_runs_equal_time_s_step_by_step(name: str, context: int, is_async: bool) -> None:
    """Runs of decode steps that cross the window (7 sequences of `context` tokens growing past 4096, 128):
    the step function and the array run give time_s of each step's shape, below full attention's."""
    model = _model(name, is_async)
    seqs, start, steps = 7, 7 * context, 600
    shapes = [
        BatchShape(num_decode_seqs=seqs, decode_kv_tokens=start + seqs * j * 8, num_sampled=seqs) for j in range(steps)
    ]
    step_s = model.decode_step_s(seqs)
    assert [step_s(shape.decode_kv_tokens) for shape in shapes] == [model.time_s(shape) for shape in shapes]
    run = model.decode_run_s(seqs, start, steps)
    stepwise = [
        model.time_s(BatchShape(num_decode_seqs=seqs, decode_kv_tokens=start + seqs * j, num_sampled=seqs))
        for j in range(steps)
    ]
    assert list(run) == pytest.approx(stepwise, rel=1e-12)
    assert run[-1] < _full_attention_step(name, seqs, start + seqs * (steps - 1))


def _full_attention_step(name: str, seqs: int, kv_tokens: int) -> float:
    """The same decode step with the window removed from the model."""
    spec = load_model(name).model_copy(update={"sliding_window": None, "num_sliding_window_layers": None})
    model = IterationModel(Deployment(spec, load_hardware(H100)))
    return model.time_s(BatchShape(num_decode_seqs=seqs, decode_kv_tokens=kv_tokens, num_sampled=seqs))
