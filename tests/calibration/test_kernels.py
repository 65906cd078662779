"""Our Triton kernels against their torch references on the CPU (TRITON_INTERPRET=1): fresh random inputs
each run, odd shapes that do not fill the tiles, error bounds by dtype, outputs poisoned with NaN before
each run so any element a kernel fails to write shows up."""

from __future__ import annotations

import os

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
