"""The device sweep (`ttftsim calibrate --device`): on a CUDA GPU, time our Triton kernels and the vendor
path (torch.matmul, scaled_dot_product_attention) over the shapes the model presets produce, plus copy
bandwidth and matmul peak, and write calibration/results/<gpu>.json. Budget: at most 8 minutes on an H200
(the grid is cut to fit `budget_s`, largest shapes last).

Timing: triton.testing.do_bench (warm-up, median of repeats, L2 flushed between runs); inputs rotate over
several buffers so repeated calls do not hit in cache.

Robust to one bad shape: results are written after each section (an interrupted sweep keeps what it
timed), a shape that runs out of GPU memory is recorded as skipped, and decode shapes whose KV cache would
pass MAX_KV_TOKENS are not built (no GPU holds that many tokens of one layer for one replica). Each kernel
family is first checked against its torch reference on the device in bf16 (the CPU tests cannot: the
interpreter has no bfloat16), and the error is recorded beside the timings.
"""

from __future__ import annotations

import datetime
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from calibration.checks import check_kernels, probe_decode
from calibration.timing import Bench, GemmShape, largest_cache, time_decodes, time_gemms, time_prefills

RESULTS = Path(__file__).resolve().parent / "results"
TOKENS = (1, 16, 64, 256, 1024, 4096, 16384)
CONTEXTS = (512, 2048, 8192, 32768)
BATCHES = (1, 8, 32, 128)
TP_SLICES = (1, 2, 4, 8)
SECTIONS = ("gemm", "prefill_attention", "decode_attention")


# The shape families the sweep times (dense 7-72B, GQA and MHA, one MoE): a fixed list, so that adding a
# preset does not grow the grid past the time budget and cut the large shapes off.
SWEEP_PRESETS = (
    "Llama-2-7b-hf",
    "Llama-2-70b-hf",
    "Llama-3.1-8B",
    "Llama-3.1-70B",
    "CodeLlama-34b-Instruct-hf",
    "Mistral-7B-v0.1",
    "Mixtral-8x7B-v0.1",
    "Qwen2.5-7B",
    "Qwen2.5-72B",
)


def gemm_grid(presets: list[Any]) -> list[GemmShape]:
    """The GEMMs of each preset's layers (QKV, O, MLP up/gate and down) per TP slice and token count."""
    shapes: dict[tuple[int, int, int], str] = {}
    for spec in presets:
        h, inter = spec.hidden_size, spec.intermediate_size
        qkv = (spec.num_attention_heads + 2 * spec.num_key_value_heads) * spec.head_dim
        for tp in TP_SLICES:
            if spec.num_attention_heads % tp or (spec.num_key_value_heads % tp and spec.num_key_value_heads > tp):
                continue
            for tokens in TOKENS:
                for n, k, name in (
                    (qkv // tp, h, "qkv"),
                    (h, h // tp, "o"),
                    (2 * inter // tp, h, "up"),
                    (h, inter // tp, "down"),
                ):
                    shapes.setdefault((tokens, n, k), f"{spec.name} {name} tp{tp}")
    return [GemmShape(m, n, k, label) for (m, n, k), label in sorted(shapes.items())]


def attention_grid(presets: list[Any]) -> list[dict[str, int]]:
    """(q heads, kv heads, head dim) per TP slice, with prefill token counts and decode batches x contexts."""
    grid = []
    seen: set[tuple[int, int, int]] = set()
    for spec in presets:
        for tp in TP_SLICES:
            if spec.num_attention_heads % tp:
                continue
            key = (spec.num_attention_heads // tp, max(1, spec.num_key_value_heads // tp), spec.head_dim)
            if key not in seen:
                seen.add(key)
                grid.append({"q_heads": key[0], "kv_heads": key[1], "head_dim": key[2]})
    return grid


def run(
    budget_s: float = 480.0,
    out_dir: Path = RESULTS,
    sections: tuple[str, ...] = SECTIONS,
    triton_decode: bool | None = None,
) -> Path:  # pragma: no cover - needs a GPU
    """Time the named sections (all by default) on this GPU and write calibration/results/<gpu>.json, after the
    checks and after each section; a section's budget share is where its deadline falls. triton_decode=False
    times decode with torch alone; None (default) runs our decode kernel in a child process first (probe_decode,
    on the largest cache the sweep times) and leaves it out if it fails there. A CUDA fault stops the sweep
    with what it has written (`aborted`)."""
    import torch

    from ttftsim.model.catalog import load_model

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: the sweep runs on a GPU")
    started = time.monotonic()
    presets = [load_model(name) for name in SWEEP_PRESETS]
    heads = attention_grid(presets)
    results = _header(budget_s)
    path = out_dir / f"{results['device'].lower().replace(' ', '-')}.json"
    if triton_decode is None and "decode_attention" in sections:
        results["decode_probe"] = probe_decode("cuda", largest=largest_cache(heads, BATCHES, CONTEXTS))
        triton_decode = results["decode_probe"].startswith("ok")
    _write(path, results)
    bench = Bench("cuda", torch.bfloat16, _do_bench, graph_seconds=_do_bench_graph)
    results["checks"] = check_kernels(bench)
    results.update(_roofs())
    _write(path, results)
    timers = {
        "gemm": (0.55, lambda b: time_gemms(gemm_grid(presets), b)),
        "prefill_attention": (0.75, lambda b: time_prefills(heads, TOKENS[2:], b)),
        "decode_attention": (1.0, lambda b: time_decodes(heads, BATCHES, CONTEXTS, b, triton_decode=triton_decode)),
    }
    for key in sections:
        share, timed = timers[key]
        results[key] = timed(bench.until(started + budget_s * share))
        results["elapsed_s"] = time.monotonic() - started
        if results[key] and "aborted" in results[key][-1]:
            results["aborted"] = f"{key}: {results[key][-1]['aborted']}"
        _write(path, results)  # after each section: an interrupted sweep keeps what it timed
        print(f"{key}: {len(results[key])} shapes, {results['elapsed_s']:.0f} s", flush=True)
        if "aborted" in results:
            break
    return path


def _header(budget_s: float) -> dict[str, Any]:  # pragma: no cover - needs a GPU
    import torch
    import triton

    return {
        "device": torch.cuda.get_device_name(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(),
        "budget_s": budget_s,
    }


def _write(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


def _do_bench(fn: Callable[[], Any]) -> float:  # pragma: no cover - needs a GPU
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=10, rep=30, return_mode="median")) / 1e3


def _do_bench_graph(fn: Callable[[], Any]) -> float:  # pragma: no cover - needs a GPU
    import triton.testing

    return float(triton.testing.do_bench_cudagraph(fn, rep=30, return_mode="median")) / 1e3


def _roofs() -> dict[str, float]:  # pragma: no cover - needs a GPU
    """Copy bandwidth (bytes read + written per second) and bf16 matmul peak."""
    import torch

    size = 1 << 30
    source = torch.empty(size, dtype=torch.uint8, device="cuda")
    target = torch.empty(size, dtype=torch.uint8, device="cuda")
    copy_s = _do_bench(lambda: target.copy_(source))
    big = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    matmul_s = _do_bench(lambda: big @ big)
    return {"copy_bytes_per_s": 2 * size / copy_s, "matmul_peak_flops": 2 * 8192**3 / matmul_s}
