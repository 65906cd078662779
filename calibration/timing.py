"""How the device sweep times each kernel family (calibration/sweep.py picks the shapes): our Triton kernel and
the vendor path on the same inputs, one row per shape. A `Bench` says where and how (do_bench on a GPU; the
tests pass the CPU under the Triton interpreter and a stand-in timer). A shape that runs out of memory (GPU
memory, or a kernel's shared memory or registers), or that no fused kernel takes, is recorded as skipped rather
than ending the sweep. A CUDA fault ends every later CUDA call of the process: the section stops there, its
last row saying why (`aborted`), and the sweep writes what it has and stops."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_KV_TOKENS = 1 << 20  # batch x context of one layer's cache: 1 M tokens (17 GB at 32 KV heads)


class CudaFaultError(Exception):
    """The CUDA context is lost (an illegal address, a launch failure): nothing more can run in this process."""


@dataclass(frozen=True)
class GemmShape:
    m: int
    n: int
    k: int
    label: str


GRAPH_COPIES = 6  # AIConfigurator's GEMM tables: six weight copies back-to-back in a CUDA graph (collect_gemm.py)


@dataclass(frozen=True)
class Bench:
    """Where and how kernels are timed: `seconds(fn)` is the median time of one call (do_bench on a GPU: an L2
    flush before each call); `graph_seconds(fn)`, when given, the median of one replay of fn captured in a CUDA
    graph, without a flush (do_bench_cudagraph), the way the kernel tables ttftsim is calibrated on were timed."""

    device: str
    dtype: Any
    seconds: Callable[[Callable[[], Any]], float]
    deadline: float = float("inf")
    graph_seconds: Callable[[Callable[[], Any]], float] | None = None

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def until(self, deadline: float) -> Bench:
        return Bench(self.device, self.dtype, self.seconds, deadline, self.graph_seconds)


def time_gemms(shapes: list[GemmShape], bench: Bench) -> list[dict[str, Any]]:
    """Our Triton GEMM and torch.matmul (cuBLAS) per shape, smallest first until the deadline."""
    import torch

    from calibration.kernels import gemm

    rows = []
    for shape in sorted(shapes, key=lambda s: s.m * s.n * s.k):
        if bench.out_of_time():
            break

        def timed(shape: GemmShape = shape) -> dict[str, float]:
            buffers = [
                (
                    torch.randn(shape.m, shape.k, device=bench.device, dtype=bench.dtype),
                    torch.randn(shape.k, shape.n, device=bench.device, dtype=bench.dtype),
                )
                for _ in range(3)
            ]
            return {
                "triton_s": bench.seconds(_rotating(buffers, gemm.gemm)),
                "torch_s": bench.seconds(_rotating(buffers, torch.matmul)),
                **_graphed_gemm(shape, buffers[0][0], bench),
            }

        try:
            rows.append({"m": shape.m, "n": shape.n, "k": shape.k, "label": shape.label, **_guarded(timed)})
        except CudaFaultError as fault:
            return [*rows, {"aborted": str(fault)}]
    return rows


def _graphed_gemm(shape: GemmShape, x: Any, bench: Bench) -> dict[str, float]:
    """torch.matmul as the calibration's tables time it: GRAPH_COPIES weight copies back-to-back, replayed in a
    CUDA graph, the time divided by the copies ({} without a graph timer; why, if the capture fails)."""
    import torch

    if bench.graph_seconds is None:
        return {}
    weights = [torch.randn(shape.k, shape.n, device=bench.device, dtype=bench.dtype) for _ in range(GRAPH_COPIES)]
    try:
        return {"torch_graph_s": bench.graph_seconds(lambda: [torch.matmul(x, w) for w in weights]) / GRAPH_COPIES}
    except RuntimeError as error:  # a capture refused leaves the context usable: this column only is lost (a
        # fault that ends the context shows at the next shape's first call, and ends the section there)
        return {"graph_skipped": (str(error).splitlines() or [type(error).__name__])[0][:200]}


def _guarded(timed: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One shape's timings, or why it has none: a shape that runs out of GPU memory (or of a kernel's shared
    memory) is skipped, not fatal; a CUDA fault raises CudaFaultError."""
    import contextlib

    import torch
    from triton.runtime.errors import OutOfResources

    try:
        return timed()
    except torch.OutOfMemoryError:
        return {"skipped": "out of GPU memory"}
    except OutOfResources as error:
        return {"skipped": str(error).splitlines()[0][:200]}
    except RuntimeError as error:  # e.g. no fused attention kernel for the shape: recorded, not fatal
        first = (str(error).splitlines() or [type(error).__name__])[0][:200]
        if "CUDA error" in first or type(error).__name__ == "AcceleratorError":
            raise CudaFaultError(first) from error
        return {"skipped": first}
    finally:
        if torch.cuda.is_available():
            with contextlib.suppress(RuntimeError):  # after a fault, this raises the same error again
                torch.cuda.empty_cache()


def largest_cache(grid: list[dict[str, int]], batches: tuple[int, ...], contexts: tuple[int, ...]) -> tuple[int, ...]:
    """(KV heads, head dim, batch, context) of the largest cache time_decodes builds: what probe_decode runs."""
    heads = max(grid, key=lambda h: h["kv_heads"] * h["head_dim"])
    batch, context = max(
        ((b, c) for b in batches for c in contexts if b * c <= MAX_KV_TOKENS), key=lambda bc: (bc[0] * bc[1], bc[1])
    )
    return heads["kv_heads"], heads["head_dim"], batch, context


def _rotating(buffers: list[Any], op: Any) -> Any:
    """Call op on the next buffer pair each time, so repeats do not hit in cache."""
    turn = [0]

    def call() -> Any:
        a, b = buffers[turn[0] % len(buffers)]
        turn[0] += 1
        return op(a, b)

    return call


def time_prefills(grid: list[dict[str, int]], tokens: tuple[int, ...], bench: Bench) -> list[dict[str, Any]]:
    """Causal prefill attention (no cached prefix): our Triton kernel and torch's scaled_dot_product_attention
    (flash or memory-efficient, as torch picks) on the same q, k, v."""
    rows = []
    for heads in grid:
        for count in tokens:
            if bench.out_of_time():
                return rows
            try:
                rows.append(
                    {**heads, "tokens": count, **_guarded(lambda h=heads, t=count: _prefill_times(h, t, bench))}
                )
            except CudaFaultError as fault:
                return [*rows, {"aborted": str(fault)}]
    return rows


def _prefill_times(heads: dict[str, int], tokens: int, bench: Bench) -> dict[str, float]:
    import torch

    from calibration.kernels import prefill_attention

    q = torch.randn(tokens, heads["q_heads"], heads["head_dim"], device=bench.device, dtype=bench.dtype)
    k = torch.randn(tokens, heads["kv_heads"], heads["head_dim"], device=bench.device, dtype=bench.dtype)
    v = torch.randn_like(k)
    return {
        "triton_s": bench.seconds(lambda: prefill_attention.prefill_attention(q, k, v, block=64)),
        "torch_s": _fused_sdpa_s(q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], bench),
    }


def _fused_sdpa_s(query: Any, keys: Any, values: Any, bench: Bench) -> float:
    """torch's scaled_dot_product_attention on (1 or batch, heads, length, head dim) tensors made contiguous,
    GQA without copying heads, causal when queries and keys are as long; the math backend is excluded (it
    materialises the scores), so the time is a fused kernel's (flash, cuDNN or memory-efficient)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention

    query, keys, values = query.contiguous(), keys.contiguous(), values.contiguous()
    causal = query.shape[2] == keys.shape[2]
    fused = [SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]
    if bench.device == "cpu":
        fused.append(SDPBackend.MATH)  # the CPU test's stand-in

    def call() -> Any:
        with sdpa_kernel(fused):
            return scaled_dot_product_attention(query, keys, values, is_causal=causal, enable_gqa=True)

    return bench.seconds(call)


def time_decodes(
    grid: list[dict[str, int]],
    batches: tuple[int, ...],
    contexts: tuple[int, ...],
    bench: Bench,
    triton_decode: bool = True,
) -> list[dict[str, Any]]:
    """Paged decode attention (our Triton kernel, block 16, a shuffled block table) and torch's
    scaled_dot_product_attention over the same keys laid out contiguously (one query per sequence, GQA),
    for batch x context up to MAX_KV_TOKENS."""
    rows = []
    for heads in grid:
        for batch in batches:
            for context in contexts:
                if bench.out_of_time():
                    return rows
                if batch * context > MAX_KV_TOKENS:
                    continue
                try:
                    times = _guarded(lambda h=heads, b=batch, c=context: _decode_times(h, b, c, bench, triton_decode))
                except CudaFaultError as fault:
                    return [*rows, {"aborted": str(fault)}]
                rows.append({**heads, "batch": batch, "context": context, **times})
    return rows


def _decode_times(heads: dict[str, int], batch: int, context: int, bench: Bench, triton: bool) -> dict[str, float]:
    """Both paths on the same queries; each builds its own keys and frees them on return (one at a time on
    the GPU)."""
    import torch

    q = torch.randn(batch, heads["q_heads"], heads["head_dim"], device=bench.device, dtype=bench.dtype)
    times = {"torch_s": _sdpa_decode_s(q, heads, context, bench)}
    if triton:
        times["triton_s"] = _paged_decode_s(q, heads, context, bench)
    return times


def _paged_decode_s(q: Any, heads: dict[str, int], context: int, bench: Bench) -> float:
    import torch

    from calibration.kernels import decode_attention

    block, batch = 16, q.shape[0]
    blocks = batch * (-(-context // block))
    cache_shape = (blocks, block, heads["kv_heads"], heads["head_dim"])
    k_cache = torch.randn(cache_shape, device=bench.device, dtype=bench.dtype)
    v_cache = torch.randn_like(k_cache)
    table = torch.randperm(blocks, dtype=torch.int32).reshape(batch, -1).to(bench.device)
    lens = torch.full((batch,), context, dtype=torch.int32, device=bench.device)
    return bench.seconds(lambda: decode_attention.decode_attention(q, k_cache, v_cache, table, lens))


def _sdpa_decode_s(q: Any, heads: dict[str, int], context: int, bench: Bench) -> float:
    import torch

    shape = (q.shape[0], heads["kv_heads"], context, heads["head_dim"])
    keys = torch.randn(shape, device=bench.device, dtype=bench.dtype)
    return _fused_sdpa_s(q.unsqueeze(2), keys, torch.randn_like(keys), bench)  # one query per sequence
