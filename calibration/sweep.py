"""The device sweep (`ttftsim calibrate --device`): on a CUDA GPU, time our Triton kernels and the vendor
path (torch.matmul, scaled_dot_product_attention) over the shapes the model presets produce, plus copy
bandwidth and matmul peak, and write calibration/results/<gpu>.json. Budget: at most 8 minutes on an H200
(the grid is cut to fit `budget_s`, largest shapes last).

Timing: triton.testing.do_bench (warm-up, median of repeats, L2 flushed between runs); inputs rotate over
several buffers so repeated calls do not hit in cache.

Not yet run on a GPU (no device was lent to the session that wrote it): the first device session should
run it once and commit the JSON.
"""

from __future__ import annotations

import datetime
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
TOKENS = (1, 16, 64, 256, 1024, 4096, 16384)
CONTEXTS = (512, 2048, 8192, 32768)
BATCHES = (1, 8, 32, 128)
TP_SLICES = (1, 2, 4, 8)


@dataclass(frozen=True)
class GemmShape:
    m: int
    n: int
    k: int
    label: str


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


def run(budget_s: float = 480.0, out_dir: Path = RESULTS) -> Path:  # pragma: no cover - needs a GPU
    import torch
    import triton

    from ttftsim.model.catalog import load_model

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: the sweep runs on a GPU")
    started = time.monotonic()
    presets = [load_model(name) for name in SWEEP_PRESETS]
    name = torch.cuda.get_device_name()
    results: dict[str, Any] = {
        "device": name,
        "driver": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    results.update(_roofs())
    results["gemm"] = _gemms(presets, started + budget_s * 0.6)
    results["prefill_attention"] = _prefills(presets, started + budget_s * 0.8)
    results["decode_attention"] = _decodes(presets, started + budget_s)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name.lower().replace(' ', '-')}.json"
    results["elapsed_s"] = time.monotonic() - started
    path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return path


def _bench(fn: Any) -> float:  # pragma: no cover - needs a GPU
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=10, rep=30, return_mode="median")) / 1e3


def _roofs() -> dict[str, float]:  # pragma: no cover - needs a GPU
    """Copy bandwidth (bytes read + written per second) and bf16 matmul peak."""
    import torch

    size = 1 << 30
    source = torch.empty(size, dtype=torch.uint8, device="cuda")
    target = torch.empty(size, dtype=torch.uint8, device="cuda")
    copy_s = _bench(lambda: target.copy_(source))
    big = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
    matmul_s = _bench(lambda: big @ big)
    return {"copy_bytes_per_s": 2 * size / copy_s, "matmul_peak_flops": 2 * 8192**3 / matmul_s}


def _gemms(presets: list[Any], deadline: float) -> list[dict[str, Any]]:  # pragma: no cover - needs a GPU
    import torch

    from calibration.kernels import gemm

    rows = []
    for shape in sorted(gemm_grid(presets), key=lambda s: s.m * s.n * s.k):
        if time.monotonic() > deadline:
            break
        buffers = [
            (
                torch.randn(shape.m, shape.k, dtype=torch.bfloat16, device="cuda"),
                torch.randn(shape.k, shape.n, dtype=torch.bfloat16, device="cuda"),
            )
            for _ in range(3)
        ]
        rows.append(
            {
                "m": shape.m,
                "n": shape.n,
                "k": shape.k,
                "label": shape.label,
                "triton_s": _bench(_rotating(buffers, gemm.gemm)),
                "torch_s": _bench(_rotating(buffers, torch.matmul)),
            }
        )
    return rows


def _rotating(buffers: list[Any], op: Any) -> Any:
    """Call op on the next buffer pair each time, so repeats do not hit in cache."""
    turn = [0]

    def call() -> Any:
        a, b = buffers[turn[0] % len(buffers)]
        turn[0] += 1
        return op(a, b)

    return call


def _prefills(presets: list[Any], deadline: float) -> list[dict[str, Any]]:  # pragma: no cover - needs a GPU
    import torch
    from torch.nn.functional import scaled_dot_product_attention

    from calibration.kernels import prefill_attention

    rows = []
    for heads in attention_grid(presets):
        for tokens in TOKENS[2:]:
            if time.monotonic() > deadline:
                return rows
            shape = (tokens, heads["q_heads"], heads["head_dim"])
            q = torch.randn(shape, dtype=torch.bfloat16, device="cuda")
            k = torch.randn(tokens, heads["kv_heads"], heads["head_dim"], dtype=torch.bfloat16, device="cuda")
            v = torch.randn_like(k)
            group = heads["q_heads"] // heads["kv_heads"]
            qt = q.transpose(0, 1)
            kt = k.repeat_interleave(group, 1).transpose(0, 1)
            vt = v.repeat_interleave(group, 1).transpose(0, 1)
            rows.append(
                {
                    **heads,
                    "tokens": tokens,
                    "triton_s": _bench(lambda q=q, k=k, v=v: prefill_attention.prefill_attention(q, k, v, block=64)),
                    "torch_s": _bench(
                        lambda qt=qt, kt=kt, vt=vt: scaled_dot_product_attention(qt, kt, vt, is_causal=True)
                    ),
                }
            )
    return rows


def _decodes(presets: list[Any], deadline: float) -> list[dict[str, Any]]:  # pragma: no cover - needs a GPU
    import torch

    from calibration.kernels import decode_attention

    rows = []
    block = 16
    for heads in attention_grid(presets):
        for batch in BATCHES:
            for context in CONTEXTS:
                if time.monotonic() > deadline:
                    return rows
                blocks = batch * (context // block)
                cache_shape = (blocks, block, heads["kv_heads"], heads["head_dim"])
                k_cache = torch.randn(cache_shape, dtype=torch.bfloat16, device="cuda")
                v_cache = torch.randn_like(k_cache)
                table = torch.randperm(blocks, device="cuda", dtype=torch.int32).reshape(batch, -1)
                lens = torch.full((batch,), context, dtype=torch.int32, device="cuda")
                q = torch.randn(batch, heads["q_heads"], heads["head_dim"], dtype=torch.bfloat16, device="cuda")
                seconds = _bench(lambda: decode_attention.decode_attention(q, k_cache, v_cache, table, lens))  # noqa: B023
                rows.append({**heads, "batch": batch, "context": context, "triton_s": seconds})
    return rows
