"""Write docs/moe-check.md: ttftsim's per-operator times against AIConfigurator's measured H100 kernel tables
for the Mixtral-class path (Mixtral-8x7B, TP2) and dense 70B at TP4 (Llama-3.1-70B FP8, Llama-2-70B BF16).

python benchmarks/moe_check.py                          # the table with the current code
python benchmarks/moe_check.py --json before.json       # save this code's numbers (e.g. from an older checkout)
python benchmarks/moe_check.py --before before.json     # the table, with those numbers as a "before" column

Each operator of one layer is compared with the table row of the same shape (GEMMs by m, n, k and dtype,
linearly interpolated in n where the table skips that width; FlashAttention by batch, context and heads;
the custom all-reduce, CUDA-graph backend; the fused MoE, SGLang's Triton fused_moe, balanced routing, TP2
expert shards). Decode batches run with 1,024 tokens of context per sequence; prefills are one prompt
of that many tokens. ttftsim's numbers are from IterationModel.timing (calibrated kernel costs, as a
simulation on H100 uses), per layer. The tables are read from ../shared (never copied into the project).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

OUT = Path(__file__).resolve().parents[1] / "docs" / "moe-check.md"
DECODE = (1, 8, 16, 32, 64, 128, 256)
PREFILL = (512, 1024, 2048, 4096, 8192)
CONTEXT = 1024
CASES = (  # label, model, TP, weight dtype
    ("Mixtral-8x7B TP2 bf16", "Mixtral-8x7B-v0.1", 2, "bf16"),
    ("Llama-3.1-70B TP4 fp8", "Llama-3.1-70B", 4, "fp8"),
    ("Llama-2-70B TP4 bf16", "Llama-2-70b-hf", 4, "bf16"),
)
GEMM_DTYPES = {"bf16": "bfloat16", "fp8": "fp8"}


@dataclass(frozen=True)
class Tables:
    gemm: pd.DataFrame
    context: pd.DataFrame
    generation: pd.DataFrame
    allreduce: pd.DataFrame
    moe: pd.DataFrame

    @classmethod
    def read(cls, root: Path) -> Tables:
        base = root / "h100_sxm"

        def one(kind: str, name: str) -> pd.DataFrame:
            return pd.read_parquet(sorted((base / kind).glob(f"*/{name}"))[-1])

        return cls(
            one("gemm", "gemm_perf.parquet"),
            one("attention", "context_attention_perf.parquet"),
            one("attention", "generation_attention_perf.parquet"),
            one("comm", "custom_allreduce_perf.parquet"),
            one("moe", "moe_perf.parquet"),
        )

    def gemm_ms(self, m: int, n: int, k: int, dtype: str) -> float:
        rows = self.gemm[
            (self.gemm["m"] == m) & (self.gemm["k"] == k) & (self.gemm["gemm_dtype"] == GEMM_DTYPES[dtype])
        ]
        rows = rows.sort_values("n")
        return float(np.interp(n, rows["n"], rows["latency"])) if len(rows) else float("nan")

    def attention_ms(self, batch: int, isl: int, heads: int, kv_heads: int, decode: bool) -> float:
        frame = self.generation if decode else self.context
        keep = (
            (frame["batch_size"] == batch)
            & (frame["num_heads"] == heads)
            & (frame["num_key_value_heads"] == kv_heads)
            & (frame["head_dim"] == 128)
            & (frame["kv_cache_dtype"] == "bfloat16")
            & (frame["window_size"] == 0)
        )
        keep &= (frame["step"] == isl - 1) if decode else (frame["isl"] == isl)
        rows = frame[keep]
        return float(rows["latency"].median()) if len(rows) else float("nan")

    def allreduce_ms(self, message_bytes: int, gpus: int) -> float:
        frame = self.allreduce
        keep = (frame["num_gpus"] == gpus) & (frame["message_size"] * 2 == message_bytes)
        rows = frame[keep & (frame["backend"] == "vllm_graph")]
        return float(rows["latency"].median()) if len(rows) else float("nan")

    def moe_ms(self, tokens: int, tp: int) -> float:
        frame = self.moe
        keep = (
            (frame["hidden_size"] == 4096)
            & (frame["inter_size"] == 14336)
            & (frame["num_experts"] == 8)
            & (frame["topk"] == 2)
            & (frame["moe_tp_size"] == tp)
            & (frame["moe_ep_size"] == 1)
            & (frame["moe_dtype"] == "bfloat16")
            & (frame["distribution"] == "balanced")
            & (frame["num_tokens"] == tokens)
        )
        rows = frame[keep & frame["kernel_source"].str.contains("fused_moe")]
        return float(rows["latency"].median()) if len(rows) else float("nan")


def predicted(name: str, tp: int, dtype: str, tokens: int, decode: bool) -> dict[str, float]:
    """ttftsim's per-layer milliseconds by operator for one step (IterationModel.timing breakdown)."""
    from ttftsim.calibration.costs import CalibratedCosts
    from ttftsim.hardware.catalog import load_hardware
    from ttftsim.model.catalog import load_model
    from ttftsim.perf.batch import BatchShape
    from ttftsim.perf.iteration import Deployment, IterationModel

    spec, hw = load_model(name), load_hardware("H100-SXM5-80GB")
    model = IterationModel(Deployment(spec, hw, tp, dtype), CalibratedCosts.load(hw))  # type: ignore[arg-type]
    if decode:
        shape = BatchShape(num_decode_seqs=tokens, decode_kv_tokens=tokens * CONTEXT, num_sampled=tokens)
    else:
        shape = BatchShape.from_sequences([tokens], [0])
    parts = model.timing(shape).breakdown
    layers = spec.num_hidden_layers
    out = {key: 1e3 * value / layers for key, value in parts.items() if key not in ("lm_head", "overhead")}
    out["allreduce"] /= 2  # two per layer
    out["attention"] = out.pop("decode_attention") + out.pop("prefill_attention")
    if spec.is_moe:
        router = model.costs.gemm_s(
            tokens, spec.num_local_experts, spec.hidden_size, "bf16", 2.0 * spec.num_local_experts * spec.hidden_size
        )
        out["moe"] -= 1e3 * router  # the table times the experts, not the router GEMM
    return out


def step_ms(name: str, tp: int, dtype: str, tokens: int, decode: bool, is_async: bool) -> float:
    """ttftsim's whole iteration (all layers, LM head, host time), vLLM 0.15.1 defaults on H100 (capture
    sizes to 512); with async scheduling where this version of the code has it."""
    from ttftsim.calibration.costs import CalibratedCosts
    from ttftsim.hardware.catalog import load_hardware
    from ttftsim.model.catalog import load_model
    from ttftsim.perf.batch import BatchShape
    from ttftsim.perf.iteration import Deployment, IterationModel

    hw = load_hardware("H100-SXM5-80GB")
    extra = {"async_scheduling": True} if is_async else {}
    try:
        deployment = Deployment(load_model(name), hw, tp, dtype, **extra)  # type: ignore[arg-type]
    except TypeError:  # code from before async scheduling
        return float("nan")
    model = IterationModel(deployment, CalibratedCosts.load(hw))
    if decode:
        shape = BatchShape(num_decode_seqs=tokens, decode_kv_tokens=tokens * (CONTEXT + 1), num_sampled=tokens)
    else:
        shape = BatchShape.from_sequences([tokens], [0])
    return 1e3 * model.time_s(shape)


STEPS = ((True, (1, 5, 37, 64, 128)), (False, (512, 2048, 8192)))


def step_rows() -> dict[str, float]:
    out: dict[str, float] = {}
    for label, name, tp, dtype in CASES:
        for decode, counts in STEPS:
            for tokens in counts:
                for is_async in (False, True):
                    key = f"{label}|{'decode' if decode else 'prefill'}|{tokens}|step{'_async' if is_async else ''}"
                    out[key] = step_ms(name, tp, dtype, tokens, decode, is_async)
    return out


def render_steps(now: dict[str, float], before: dict[str, float]) -> str:
    lines = [
        "| case | phase | tokens | before ms (sync) | after ms (sync) | change | after ms (async) | change |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, value in now.items():
        if key.endswith("_async"):
            continue
        case, phase, tokens, _ = key.split("|")
        old, overlapped = before.get(key, float("nan")), now[key + "_async"]
        lines.append(
            f"| {case} | {phase} | {tokens} | {old:.2f} | {value:.2f} | {_pct(value, old)} | {overlapped:.2f} | "
            f"{_pct(overlapped, old)} |"
        )
    return "\n".join(lines) + "\n"


def measured(tables: Tables, name: str, tp: int, dtype: str, tokens: int, decode: bool) -> dict[str, float]:
    from ttftsim.model.catalog import load_model

    spec = load_model(name)
    h, d = spec.hidden_size, spec.head_dim
    heads, kv_heads = spec.num_attention_heads // tp, max(1, spec.num_key_value_heads // tp)
    inter = spec.intermediate_size // tp
    out = {
        "qkv_proj": tables.gemm_ms(tokens, (heads + 2 * kv_heads) * d, h, dtype),
        "o_proj": tables.gemm_ms(tokens, h, heads * d, dtype),
        "allreduce": tables.allreduce_ms(2 * tokens * h, tp),
        "attention": (
            tables.attention_ms(tokens, CONTEXT, heads, kv_heads, True)
            if decode
            else tables.attention_ms(1, tokens, heads, kv_heads, False)
        ),
    }
    if spec.is_moe:
        out["moe"] = tables.moe_ms(tokens, tp)
    else:
        out["mlp"] = tables.gemm_ms(tokens, 2 * inter, h, dtype) + tables.gemm_ms(tokens, h, inter, dtype)
    return out


def collect(tables: Tables | None) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for label, name, tp, dtype in CASES:
        for decode, counts in ((True, DECODE), (False, PREFILL)):
            for tokens in counts:
                ours = predicted(name, tp, dtype, tokens, decode)
                truth = measured(tables, name, tp, dtype, tokens, decode) if tables is not None else {}
                for op, value in ours.items():
                    rows.append(
                        {
                            "case": label,
                            "phase": "decode" if decode else "prefill",
                            "tokens": tokens,
                            "op": op,
                            "ttftsim_ms": value,
                            "measured_ms": truth.get(op, float("nan")),
                        }
                    )
    return rows


def _key(row: dict[str, object]) -> str:
    return f"{row['case']}|{row['phase']}|{row['tokens']}|{row['op']}"


def _pct(value: float, truth: float) -> str:
    return "-" if not np.isfinite(truth) or not np.isfinite(value) else f"{100 * (value / truth - 1):+.0f}%"


def render(rows: list[dict[str, object]], before: dict[str, float]) -> str:
    lines = [
        "| case | phase | tokens | op | measured ms | ttftsim before | err before | ttftsim after | err after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        truth, after = float(row["measured_ms"]), float(row["ttftsim_ms"])  # type: ignore[arg-type]
        old = before.get(_key(row), float("nan"))
        measured_text = f"{truth:.4f}" if np.isfinite(truth) else "-"
        old_text = f"{old:.4f}" if np.isfinite(old) else "-"
        lines.append(
            f"| {row['case']} | {row['phase']} | {row['tokens']} | {row['op']} | {measured_text} | {old_text} | "
            f"{_pct(old, truth)} | {after:.4f} | {_pct(after, truth)} |"
        )
    return "\n".join(lines) + "\n"


def summary(rows: list[dict[str, object]], before: dict[str, float]) -> str:
    """Per case and phase: the sum over the operators that have a measured counterpart (one layer)."""
    frame = pd.DataFrame(rows)
    frame["before_ms"] = [before.get(_key(row), float("nan")) for row in rows]
    frame = frame[np.isfinite(frame["measured_ms"].astype(float))]
    lines = [
        "| case | phase | tokens | measured sum ms | before | err | after | err |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (case, phase, tokens), part in frame.groupby(["case", "phase", "tokens"], sort=False):
        truth, old, new = (float(part[c].sum()) for c in ("measured_ms", "before_ms", "ttftsim_ms"))
        errors = f"{old:.3f} | {_pct(old, truth)} | {new:.3f} | {_pct(new, truth)}"
        lines.append(f"| {case} | {phase} | {tokens} | {truth:.3f} | {errors} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write ttftsim's numbers here (no tables needed) and stop")
    parser.add_argument("--before", type=Path, help="numbers saved with --json, shown as the 'before' column")
    args = parser.parse_args()
    warnings.simplefilter("ignore", UserWarning)  # shapes at a calibrated range's edge: reported in the table
    if args.json is not None:
        numbers = {_key(r): r["ttftsim_ms"] for r in collect(None)} | step_rows()
        args.json.write_text(json.dumps(numbers, indent=1) + "\n")
        return 0
    from ttftsim.shared_data import shared_dir

    shared = shared_dir()
    if shared is None:
        print("../shared is absent: no kernel tables to compare with", file=sys.stderr)
        return 1
    rows = collect(Tables.read(shared / "data/kernels/aiconfigurator"))
    before = json.loads(args.before.read_text()) if args.before is not None else {}
    text = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
    head = text.split("<!-- table -->")[0] if "<!-- table -->" in text else "# MoE and TP4 operator check\n\n"
    OUT.write_text(
        head
        + "<!-- table -->\n\n## Sum of the compared operators, one layer\n\n"
        + summary(rows, before)
        + "\n## Whole iterations (ttftsim only: no measured counterpart)\n\n"
        + render_steps(step_rows(), before)
        + "\n## Per operator, one layer\n\n"
        + render(rows, before),
        encoding="utf-8",
    )
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
