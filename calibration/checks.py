"""The device sweep's correctness checks, run on the GPU before anything is timed: each Triton kernel against its
torch reference in the sweep's dtype (the CPU tests cannot: the interpreter has no bfloat16), and a probe of
the paged decode kernel in a child process, so that a fault there cannot end the sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from calibration.timing import Bench


def check_kernels(bench: Bench) -> dict[str, float]:
    """Largest absolute error of each Triton kernel against its torch reference, on one odd shape each, in
    the bench's dtype (inputs scaled so outputs are O(1))."""
    import torch

    from calibration.kernels import decode_attention, gemm, prefill_attention

    gen = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape: int, scale: float = 1.0) -> Any:
        return (torch.randn(*shape, generator=gen) * scale).to(bench.device, bench.dtype)

    a, b = rand(37, 200, scale=200**-0.5), rand(200, 72)
    q, k, v = rand(45, 8, 64), rand(77, 2, 64), rand(77, 2, 64)
    kc, vc = rand(12, 16, 2, 64), rand(12, 16, 2, 64)
    table = torch.arange(12, dtype=torch.int32).flip(0).reshape(3, 4).to(bench.device)
    lens = torch.tensor([5, 64, 40], dtype=torch.int32, device=bench.device)
    qd = rand(3, 8, 64)
    pairs = {  # the references run on the CPU, in fp32 inside
        "gemm": (gemm.gemm(a, b), gemm.reference(a.cpu(), b.cpu())),
        "prefill_attention": (
            prefill_attention.prefill_attention(q, k, v),
            prefill_attention.reference(q.cpu(), k.cpu(), v.cpu()),
        ),
        "decode_attention": (
            decode_attention.decode_attention(qd, kc, vc, table, lens),
            decode_attention.reference(qd.cpu(), kc.cpu(), vc.cpu(), table.cpu(), lens.cpu()),
        ),
    }
    return {key: float((got.float().cpu() - want.float().cpu()).abs().max()) for key, (got, want) in pairs.items()}


PROBE = """
import sys, torch
from calibration.kernels import decode_attention
device, dtype = sys.argv[1], getattr(torch, sys.argv[2])
q = torch.randn(1, 32, 128, device=device, dtype=dtype)
k_cache = torch.randn(32, 16, 32, 128, device=device, dtype=dtype)
table = torch.randperm(32, dtype=torch.int32).reshape(1, 32).to(device)
lens = torch.full((1,), 512, dtype=torch.int32, device=device)
out = decode_attention.decode_attention(q, k_cache, k_cache, table, lens)
want = decode_attention.reference(q.cpu(), k_cache.cpu(), k_cache.cpu(), table.cpu(), lens.cpu())
print((out.float().cpu() - want.float()).abs().max().item())
"""


def probe_decode(device: str, dtype: str = "bfloat16") -> str:
    """Run the paged decode kernel once (the sweep's first decode shape: 32 heads of 128, one sequence of 512
    tokens) in a child process with launches blocking: "ok", or the failure's last line."""
    import os
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[1])
    env = dict(
        os.environ, CUDA_LAUNCH_BLOCKING="1", PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE, device, dtype], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
    if done.returncode:
        return f"failed: {lines[-1][:300]}"
    error = float(done.stdout.strip().splitlines()[-1])
    return "ok" if error < 0.05 else f"failed: max abs error {error:g} against the reference"
