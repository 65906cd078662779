"""The device sweep's correctness checks, run on the GPU before anything is timed: the GEMM and prefill kernels
against their torch references in the sweep's dtype (the CPU tests cannot: the interpreter has no bfloat16), and
the paged decode kernel in a child process, so that a fault there cannot end the sweep: against its reference on a
small cache, then run once on the largest cache the sweep times.

History: the first H100 run (2026-12-05) faulted in the decode section with an illegal memory access, at the first
cache over 2^31 elements (32 KV heads of 128, batch 32 x 32,768 tokens): the kernel's block offset was 32-bit. It
is 64-bit now; the probe checks the largest cache before the sweep relies on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from calibration.timing import Bench


def check_kernels(bench: Bench) -> dict[str, float]:
    """Largest absolute error of the GEMM and prefill kernels against their torch references, on one odd shape
    each, in the bench's dtype (inputs scaled so outputs are O(1)); the decode kernel's is probe_decode's."""
    import torch

    from calibration.kernels import gemm, prefill_attention

    gen = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape: int, scale: float = 1.0) -> Any:
        return (torch.randn(*shape, generator=gen) * scale).to(bench.device, bench.dtype)

    a, b = rand(37, 200, scale=200**-0.5), rand(200, 72)
    q, k, v = rand(45, 8, 64), rand(77, 2, 64), rand(77, 2, 64)
    pairs = {  # the references run on the CPU, in fp32 inside
        "gemm": (gemm.gemm(a, b), gemm.reference(a.cpu(), b.cpu())),
        "prefill_attention": (
            prefill_attention.prefill_attention(q, k, v),
            prefill_attention.reference(q.cpu(), k.cpu(), v.cpu()),
        ),
    }
    return {key: float((got.float().cpu() - want.float().cpu()).abs().max()) for key, (got, want) in pairs.items()}


PROBE = """
import sys, torch
from calibration.kernels import decode_attention
device, dtype = sys.argv[1], getattr(torch, sys.argv[2])
kv_heads, head_dim, batch, context = map(int, sys.argv[3:7])
q = torch.randn(3, 8, 64, device=device, dtype=dtype)
k_cache = torch.randn(12, 16, 2, 64, device=device, dtype=dtype)
table = torch.arange(12, dtype=torch.int32).flip(0).reshape(3, 4).to(device)
lens = torch.tensor([5, 64, 40], dtype=torch.int32, device=device)
out = decode_attention.decode_attention(q, k_cache, k_cache, table, lens)
want = decode_attention.reference(q.cpu(), k_cache.cpu(), k_cache.cpu(), table.cpu(), lens.cpu())
print((out.float().cpu() - want.float()).abs().max().item(), flush=True)
blocks = batch * (-(-context // 16))
k_cache = torch.randn(blocks, 16, kv_heads, head_dim, device=device, dtype=dtype)
q = torch.randn(batch, kv_heads, head_dim, device=device, dtype=dtype)
table = torch.randperm(blocks, dtype=torch.int32).reshape(batch, -1).to(device)
lens = torch.full((batch,), context, dtype=torch.int32, device=device)
out = decode_attention.decode_attention(q, k_cache, k_cache, table, lens)
print(bool(torch.isfinite(out).all()))
"""


def probe_decode(device: str, dtype: str = "bfloat16", largest: tuple[int, int, int, int] = (2, 64, 2, 40)) -> str:
    """Run the paged decode kernel in a child process with launches blocking: against its reference on a small
    cache, then once on `largest` (KV heads, head dim, batch, context: the largest cache the sweep times).
    "ok (max abs error E)", or "failed: " and why (a fault, a timeout, a wrong or non-finite result)."""
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1", PYTHONPATH=path)
    command = [sys.executable, "-c", PROBE, device, dtype, *map(str, largest)]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return "failed: timed out after 300 s"
    lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
    if done.returncode:
        return f"failed: {lines[-1][:300]}"
    error, finite = done.stdout.strip().splitlines()[-2:]
    if float(error) >= 0.05:
        return f"failed: max abs error {float(error):g} against the reference"
    return (
        f"ok (max abs error {float(error):g})" if finite == "True" else "failed: non-finite output on the largest cache"
    )
