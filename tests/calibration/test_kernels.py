"""Our Triton kernels against their torch references on the CPU (TRITON_INTERPRET=1): fresh random inputs
each run, odd shapes that do not fill the tiles, error bounds by dtype, outputs poisoned with NaN before
each run so any element a kernel fails to write shows up."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ["TRITON_INTERPRET"] = "1"  # before the kernels are decorated: run them on the CPU
torch = pytest.importorskip("torch", reason="the kernels need torch (pip install 'ttftsim[calibrate]')")
pytest.importorskip("triton", reason="the kernels need triton (pip install 'ttftsim[calibrate]')")

from calibration.kernels import decode_attention, gemm, prefill_attention, rmsnorm  # noqa: E402

TOLERANCE = {torch.float32: 2e-4, torch.float16: 2e-2}
# bf16 is left to the device run: Triton 3.9's interpreter computes on numpy, which has no bfloat16, and
# reads torch's bf16 tensors as garbage (seen: 3.7e10 for values near 1)
DTYPES = [torch.float32, torch.float16]


def _poisoned(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.full(shape, float("nan"), dtype=dtype)


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    assert not torch.isnan(actual).any(), "an output element was never written"
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(actual.float(), expected.float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("m", "n", "k"), [(1, 48, 40), (37, 20, 70), (64, 64, 64)])
def test_gemm(dtype: torch.dtype, m: int, n: int, k: int) -> None:
    a, b = torch.randn(m, k).to(dtype) / k**0.5, torch.randn(k, n).to(dtype)
    out = gemm.gemm(a, b, out=_poisoned((m, n), dtype))
    _close(out, gemm.reference(a, b), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("rows", "width"), [(1, 64), (5, 100), (3, 256)])
def test_rmsnorm(dtype: torch.dtype, rows: int, width: int) -> None:
    x, w = torch.randn(rows, width).to(dtype), torch.rand(width).to(dtype) + 0.5
    _close(rmsnorm.rmsnorm(x, w, out=_poisoned((rows, width), dtype)), rmsnorm.reference(x, w), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("t", "s", "q_heads", "kv_heads", "d"),
    [(1, 1, 2, 1, 16), (20, 20, 4, 2, 32), (13, 45, 8, 2, 16), (33, 33, 2, 2, 64)],
)
def test_causal_prefill_attention_with_gqa(
    dtype: torch.dtype, t: int, s: int, q_heads: int, kv_heads: int, d: int
) -> None:
    q = torch.randn(t, q_heads, d).to(dtype)
    k, v = torch.randn(s, kv_heads, d).to(dtype), torch.randn(s, kv_heads, d).to(dtype)
    out = prefill_attention.prefill_attention(q, k, v, out=_poisoned((t, q_heads, d), dtype))
    _close(out, prefill_attention.reference(q, k, v), dtype)


def test_prefill_is_causal() -> None:
    """Changing a later key does not change an earlier query's output."""
    q, k, v = torch.randn(10, 2, 16), torch.randn(10, 2, 16), torch.randn(10, 2, 16)
    first = prefill_attention.prefill_attention(q, k, v)
    k[7:], v[7:] = torch.randn(3, 2, 16), torch.randn(3, 2, 16)
    second = prefill_attention.prefill_attention(q, k, v)
    torch.testing.assert_close(first[:7], second[:7])
    assert not torch.allclose(first[7:], second[7:])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("lens", "block_size", "q_heads", "kv_heads", "d"),
    [([1, 17, 40], 16, 4, 2, 32), ([5, 64], 8, 2, 1, 16), ([33], 16, 8, 8, 64)],
)
def test_paged_decode_attention(
    dtype: torch.dtype, lens: list[int], block_size: int, q_heads: int, kv_heads: int, d: int
) -> None:
    batch = len(lens)
    per_seq = [-(-n // block_size) for n in lens]
    num_blocks = sum(per_seq) + 3
    order = torch.randperm(num_blocks)  # blocks scattered through the cache, as the allocator leaves them
    table = torch.zeros(batch, max(per_seq), dtype=torch.int32)
    used = 0
    for b, count in enumerate(per_seq):
        table[b, :count] = order[used : used + count].to(torch.int32)
        used += count
    k_cache = torch.randn(num_blocks, block_size, kv_heads, d).to(dtype)
    v_cache = torch.randn(num_blocks, block_size, kv_heads, d).to(dtype)
    q, seq_lens = torch.randn(batch, q_heads, d).to(dtype), torch.tensor(lens, dtype=torch.int32)
    out = decode_attention.decode_attention(
        q, k_cache, v_cache, table, seq_lens, out=_poisoned((batch, q_heads, d), dtype)
    )
    _close(out, decode_attention.reference(q, k_cache, v_cache, table, seq_lens), dtype)


def test_decode_matches_prefill_last_row() -> None:
    """The decode kernel over a paged cache equals the prefill kernel's last query over the same keys."""
    s, heads, d, block = 21, 4, 32, 8
    k, v, q = torch.randn(s, 2, d), torch.randn(s, 2, d), torch.randn(s, heads, d)
    full = prefill_attention.prefill_attention(q, k, v)
    blocks = -(-s // block)
    k_cache = torch.zeros(blocks, block, 2, d)
    v_cache = torch.zeros(blocks, block, 2, d)
    k_cache.view(-1, 2, d)[:s], v_cache.view(-1, 2, d)[:s] = k, v
    table = torch.arange(blocks, dtype=torch.int32)[None, :]
    last = decode_attention.decode_attention(q[-1:], k_cache, v_cache, table, torch.tensor([s], dtype=torch.int32))
    torch.testing.assert_close(last[0], full[-1], atol=1e-4, rtol=1e-4)


def _counting_bench(calls: list[int]) -> Any:
    """The sweep's timing hook on the CPU: runs each timed call once and returns a fixed time."""
    from calibration.timing import Bench

    def seconds(fn: Any) -> float:
        fn()
        calls.append(1)
        return 1e-3

    return Bench("cpu", torch.float32, seconds)


def test_device_sweep_sections_run_on_the_cpu() -> None:
    """The sweep's sections with the interpreter standing in for the GPU: the GEMM and prefill kernels checked
    against their references, one row per shape with both timings, decode shapes past MAX_KV_TOKENS not built."""
    from calibration import checks, timing

    calls: list[int] = []
    bench = _counting_bench(calls)
    errors = checks.check_kernels(bench)
    assert set(errors) == {"gemm", "prefill_attention"}  # decode's is the probe's, in a child process
    assert all(error < 1e-4 for error in errors.values())
    gemms = timing.time_gemms([timing.GemmShape(16, 24, 40, "b"), timing.GemmShape(1, 8, 8, "a")], bench)
    assert [(row["m"], row["label"]) for row in gemms] == [(1, "a"), (16, "b")]  # smallest first
    heads = [{"q_heads": 4, "kv_heads": 2, "head_dim": 16}]
    prefills = timing.time_prefills(heads, (3, 20), bench)
    assert [(row["tokens"], row["triton_s"], row["torch_s"]) for row in prefills] == [(3, 1e-3, 1e-3), (20, 1e-3, 1e-3)]
    decodes = timing.time_decodes(heads, (2, timing.MAX_KV_TOKENS), (17,), bench)
    assert [(row["batch"], row["context"], sorted(row)) for row in decodes] == [
        (2, 17, ["batch", "context", "head_dim", "kv_heads", "q_heads", "torch_s", "triton_s"])
    ]
    torch_only = timing.time_decodes(heads, (2,), (17,), bench, triton_decode=False)
    assert "triton_s" not in torch_only[0] and torch_only[0]["torch_s"] == 1e-3
    assert len(calls) == 2 * (2 + 2 + 1) + 1
    assert timing.time_gemms([timing.GemmShape(1, 8, 8, "a")], bench.until(0.0)) == []  # past the deadline


def test_device_sweep_skips_a_shape_out_of_memory_and_stops_a_section_at_a_cuda_fault() -> None:
    """Out of memory: that shape skipped. A CUDA fault (the context is lost): the section ends with a row
    saying why, the rows before it kept."""
    from calibration import timing

    def out_of_memory() -> dict[str, float]:
        raise torch.OutOfMemoryError("CUDA out of memory")

    assert timing._guarded(out_of_memory) == {"skipped": "out of GPU memory"}
    calls: list[int] = []

    def faulting(fn: Any) -> float:
        calls.append(1)
        if len(calls) > 2:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        fn()
        return 1e-3

    bench = timing.Bench("cpu", torch.float32, faulting)
    shapes = [timing.GemmShape(m, 8, 8, str(m)) for m in (1, 2, 3)]
    rows = timing.time_gemms(shapes, bench)
    assert [row.get("label") for row in rows] == ["1", None]
    assert rows[-1] == {"aborted": "CUDA error: an illegal memory access was encountered"}


def test_the_decode_probe_runs_the_largest_cache_the_sweep_builds() -> None:
    from calibration import timing

    grid = [{"q_heads": 32, "kv_heads": 8, "head_dim": 128}, {"q_heads": 32, "kv_heads": 32, "head_dim": 128}]
    assert timing.largest_cache(grid, (1, 8, 32, 128), (512, 2048, 8192, 32768)) == (32, 128, 32, 32768)


def test_decode_probe_runs_the_kernel_in_a_child_process() -> None:
    """The sweep's guard against a faulting decode kernel: the child checks it against the reference on a small
    cache, then runs the largest (here on the CPU under the interpreter, which the child inherits)."""
    from calibration import checks

    assert checks.probe_decode("cpu", "float32", largest=(2, 16, 3, 40)).startswith("ok (max abs error ")
    assert checks.probe_decode("no-such-device", "float32").startswith("failed: ")


def test_the_gemm_is_also_timed_as_the_tables_were_when_a_graph_timer_is_given() -> None:
    """Six weight copies back-to-back (AIConfigurator's method), the replay's time divided by six; the deadline's
    copy of the bench keeps the graph timer."""
    from calibration import timing

    replays: list[int] = []

    def graph(fn: Any) -> float:
        replays.append(len(fn()))  # the six products of one replay
        return 6e-3

    bench = timing.Bench("cpu", torch.float32, lambda fn: (fn(), 1e-3)[1], graph_seconds=graph).until(1e18)
    (row,) = timing.time_gemms([timing.GemmShape(4, 8, 16, "a")], bench)
    assert (row["torch_s"], row["torch_graph_s"], replays) == (1e-3, 1e-3, [6])
    assert "torch_graph_s" not in timing.time_gemms([timing.GemmShape(4, 8, 16, "a")], _counting_bench([]))[0]

    def refused(fn: Any) -> float:
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    capture = timing.Bench("cpu", torch.float32, lambda fn: (fn(), 1e-3)[1], graph_seconds=refused)
    (row,) = timing.time_gemms([timing.GemmShape(4, 8, 16, "a")], capture)  # the row stays; the section goes on
    assert row["torch_s"] == 1e-3 and row["graph_skipped"].startswith("CUDA error: operation not permitted")
