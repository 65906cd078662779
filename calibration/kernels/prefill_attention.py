"""Causal prefill attention with GQA, tiled over query and key blocks with an online softmax
(FlashAttention-style). The T queries are the last T positions of S keys (S - T cached tokens before them,
as in chunked prefill or a prefix-cache hit); query head h reads KV head h // (Hq / Hkv)."""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl


@triton.jit
def _prefill_kernel(
    q, k, v, o, t, s, sqt, sqh, skt, skh, svt, svh, sot, soh, group, scale,
    D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
):  # fmt: skip
    pid_m, head = tl.program_id(0), tl.program_id(1)
    kv_head = head // group
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    queries = tl.load(q + rm[:, None] * sqt + head * sqh + rd[None, :], mask=rm[:, None] < t, other=0.0)
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, D), tl.float32)
    offset = s - t
    hi = tl.minimum(s, offset + (pid_m + 1) * BM)  # causal: no key beyond the block's last query
    for start in range(0, hi, BN):
        rn = start + tl.arange(0, BN)
        keys = tl.load(k + rn[:, None] * skt + kv_head * skh + rd[None, :], mask=rn[:, None] < s, other=0.0)
        scores = tl.dot(queries, tl.trans(keys)).to(tl.float32) * scale
        allowed = (rn[None, :] <= offset + rm[:, None]) & (rn[None, :] < s)
        scores = tl.where(allowed, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        values = tl.load(v + rn[:, None] * svt + kv_head * svh + rd[None, :], mask=rn[:, None] < s, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(values.dtype), values).to(tl.float32)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o + rm[:, None] * sot + head * soh + rd[None, :], out.to(o.dtype.element_ty), mask=rm[:, None] < t)


def prefill_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor | None = None, block: int = 16
) -> torch.Tensor:
    t, q_heads, d = q.shape
    s, kv_heads, _ = k.shape
    assert q_heads % kv_heads == 0 and s >= t
    o = out if out is not None else torch.empty_like(q)
    grid: Any = (triton.cdiv(t, block), q_heads)
    _prefill_kernel[grid](
        q, k, v, o, t, s, q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        o.stride(0), o.stride(1), q_heads // kv_heads, 1.0 / math.sqrt(d), D=d, BM=block, BN=block,
    )  # fmt: skip
    return o


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    t, q_heads, d = q.shape
    s, kv_heads, _ = k.shape
    group = q_heads // kv_heads
    keys = k.float().repeat_interleave(group, dim=1)  # (s, Hq, d)
    values = v.float().repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q.float(), keys) / math.sqrt(d)
    positions = torch.arange(t)[:, None] + (s - t)
    scores = scores.masked_fill(torch.arange(s)[None, :] > positions, float("-inf"))
    return torch.einsum("hts,shd->thd", scores.softmax(-1), values).to(q.dtype)
