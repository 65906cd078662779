"""Paged decode attention: one new query per sequence against its KV cache, read block by block through
its block table (vLLM's layout: cache[num_blocks, block_size, kv_heads, head_dim]), online softmax."""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl


@triton.jit
def _decode_kernel(
    q, kc, vc, table, lens, o, sqb, sqh, skb, skt, skh, svb, svt, svh, stb, sob, soh, group, scale,
    D: tl.constexpr, BS: tl.constexpr,
):  # fmt: skip
    seq, head = tl.program_id(0), tl.program_id(1)
    kv_head = head // group
    rd = tl.arange(0, D)
    rows = tl.arange(0, BS)
    query = tl.load(q + seq * sqb + head * sqh + rd).to(tl.float32)
    length = tl.load(lens + seq)
    m_i = float("-inf")
    l_i = 0.0
    acc = tl.zeros((D,), tl.float32)
    for index in range(0, tl.cdiv(length, BS)):
        # 64-bit: block x block stride passes 2^31 elements past 524,288 tokens of 32 KV heads of 128 (as vLLM does)
        block = tl.load(table + seq * stb + index).to(tl.int64)
        valid = index * BS + rows < length
        keys = tl.load(
            kc + block * skb + rows[:, None] * skt + kv_head * skh + rd[None, :], mask=valid[:, None], other=0.0
        )
        scores = tl.sum(keys.to(tl.float32) * query[None, :], 1) * scale
        scores = tl.where(valid, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 0))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new)
        l_i = l_i * alpha + tl.sum(p, 0)
        values = tl.load(
            vc + block * svb + rows[:, None] * svt + kv_head * svh + rd[None, :], mask=valid[:, None], other=0.0
        )
        acc = acc * alpha + tl.sum(p[:, None] * values.to(tl.float32), 0)
        m_i = m_new
    tl.store(o + seq * sob + head * soh + rd, (acc / l_i).to(o.dtype.element_ty))


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    batch, q_heads, d = q.shape
    _, block_size, kv_heads, _ = k_cache.shape
    o = out if out is not None else torch.empty_like(q)
    grid: Any = (batch, q_heads)
    _decode_kernel[grid](
        q, k_cache, v_cache, block_table, seq_lens, o, q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), v_cache.stride(0), v_cache.stride(1),
        v_cache.stride(2), block_table.stride(0), o.stride(0), o.stride(1), q_heads // kv_heads,
        1.0 / math.sqrt(d), D=d, BS=block_size,
    )  # fmt: skip
    return o


def reference(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor
) -> torch.Tensor:
    batch, q_heads, d = q.shape
    _, block_size, kv_heads, _ = k_cache.shape
    out = torch.empty_like(q)
    for b in range(batch):
        length = int(seq_lens[b])
        blocks = block_table[b, : (length + block_size - 1) // block_size].long()
        keys = k_cache[blocks].reshape(-1, kv_heads, d)[:length].float().repeat_interleave(q_heads // kv_heads, 1)
        values = v_cache[blocks].reshape(-1, kv_heads, d)[:length].float().repeat_interleave(q_heads // kv_heads, 1)
        scores = torch.einsum("hd,shd->hs", q[b].float(), keys) / math.sqrt(d)
        out[b] = torch.einsum("hs,shd->hd", scores.softmax(-1), values).to(q.dtype)
    return out
