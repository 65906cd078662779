"""C = A @ B, tiled, fp32 accumulation, output in A's dtype."""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_kernel(a, b, c, m, n, k, sam, sak, sbk, sbn, scm, scn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for start in range(0, k, BK):
        kk = start + rk
        tile_a = tl.load(
            a + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < m) & (kk[None, :] < k), other=0.0
        )
        tile_b = tl.load(
            b + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < k) & (rn[None, :] < n), other=0.0
        )
        acc += tl.dot(tile_a, tile_b)
    tl.store(
        c + rm[:, None] * scm + rn[None, :] * scn,
        acc.to(c.dtype.element_ty),
        mask=(rm[:, None] < m) & (rn[None, :] < n),
    )


def gemm(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, block: tuple[int, int, int] = (32, 32, 32)
) -> torch.Tensor:
    m, k = a.shape
    k2, n = b.shape
    assert k == k2, "inner dimensions differ"
    c = out if out is not None else torch.empty((m, n), dtype=a.dtype, device=a.device)
    bm, bn, bk = block
    grid: Any = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    _gemm_kernel[grid](a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride(), BM=bm, BN=bn, BK=bk)
    return c


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)
