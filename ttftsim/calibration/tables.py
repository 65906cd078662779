"""Importers for public measured kernel tables, converted to one format: a row per measured kernel with
`op` (gemm, prefill_attention, decode_attention, allreduce), the shape columns that op uses, and seconds.

AIConfigurator (../shared/data/kernels/aiconfigurator/<system>/<op>/<engine>-<version>/*.parquet, or the
aiconfigurator-core package's systems/data/<system>/<op>/<engine>/<version>/*.parquet; Apache-2.0; each
<system> folder belongs to the hardware profile whose aiconfigurator_system names it, so a new GPU needs only
its profile; the vLLM engine's tables are preferred where a folder has several engines):
GEMM (m, n, k, dtype), context attention (batch, isl, heads, kv heads, head_dim), generation attention
(batch, isl + step cached tokens), custom all-reduce (GPUs, message bytes; CUDA-graph backend), fused MoE
(tokens, experts, top-k, hidden, expert width per TP rank; no expert parallelism, balanced routing so min(experts,
tokens x top-k) experts are hit; the Triton fused_moe kernel's bf16 and fp8 (block-scaled) rows, and the Marlin
kernel's weight-only int4 rows, the w4a16 kernel 4-bit experts run on: MOE_KERNELS). Latencies are in
milliseconds there.
The raw files are never copied into the project: only fitted coefficients.

Two more sources are read the same way to check, never to fit: Vidur's operator profiles (projection GEMMs)
and Splitwise's whole-iteration times (ops `prefill_step`, `decode_step`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ttftsim.errors import InputError
from ttftsim.hardware.catalog import hardware_for_system

AICONFIGURATOR_PACKAGE = "aiconfigurator-core"  # `--from aiconfigurator-core`: the installed package's tables
GEMM_DTYPES = {"bfloat16": "bf16", "fp8": "fp8"}
KV_BYTES = {"bfloat16": 2, "fp8": 1}


def describe_tables(root: Path) -> str:
    """Where a calibration's tables came from, for its provenance: the package and its version, or the folder."""
    if str(root) != AICONFIGURATOR_PACKAGE:
        return str(root)
    from importlib.metadata import version

    return f"aiconfigurator-core {version(AICONFIGURATOR_PACKAGE)} (PyPI, Apache-2.0): aiconfigurator_core/systems/data"


def aiconfigurator_core_tables() -> Path:
    """The kernel tables the aiconfigurator-core package ships (pip install ttftsim[aiconfigurator])."""
    try:
        from importlib.resources import files

        return Path(str(files("aiconfigurator_core") / "systems" / "data"))
    except ModuleNotFoundError:
        raise InputError(
            AICONFIGURATOR_PACKAGE, "", "not installed (pip install 'ttftsim[aiconfigurator]' or aiconfigurator-core)"
        ) from None


def _one_kernel_per_dtype(frame: pd.DataFrame) -> pd.DataFrame:
    """Where a dtype was timed with several kernels, the default one (torch's linear, vllm_default); a dtype
    timed with one kernel keeps it (fp8 in aiconfigurator-core's vLLM 0.24 tables: CUTLASS scaled-mm only)."""
    if "kernel_source" not in frame.columns or frame.empty:
        return frame
    keep = pd.Series(True, index=frame.index)
    for _, rows in frame.groupby("gemm_dtype", sort=False):
        if rows["kernel_source"].nunique() > 1:
            keep[rows.index] = rows["kernel_source"].str.contains("torch|default")
    return frame[keep]  # in the table's own order


def _gemm(frame: pd.DataFrame) -> pd.DataFrame:
    frame = _one_kernel_per_dtype(frame[frame["gemm_dtype"].isin(list(GEMM_DTYPES))])
    return pd.DataFrame(
        {
            "op": "gemm",
            "dtype": frame["gemm_dtype"].map(GEMM_DTYPES),
            "m": frame["m"],
            "n": frame["n"],
            "k": frame["k"],
            "seconds": frame["latency"] / 1e3,
        }
    )


def _attention(frame: pd.DataFrame, op: str) -> pd.DataFrame:
    keep = frame["attn_dtype"] == "bfloat16"
    for column, plain in (("window_size", 0), ("beam_width", 1)):  # older tables lack these columns
        if column in frame.columns:
            keep &= frame[column] == plain
    # a table may time the other phase's kernel too (Blackwell's context tables of vLLM 0.24: FlashInfer's TRT-LLM
    # decode kernel at one token per sequence beside its prefill kernel): this phase's only
    other = "decode" if op == "prefill_attention" else "prefill"
    frame = frame[keep & ~frame["kernel_source"].str.contains(other, regex=False)]
    if frame["kernel_source"].nunique() > 1:
        frame = frame[frame["kernel_source"] == sorted(frame["kernel_source"].unique())[0]]
    step = frame["step"] if "step" in frame.columns else 0
    cached = frame["isl"] + step if op == "decode_attention" else frame["isl"]
    return pd.DataFrame(
        {
            "op": op,
            "dtype": frame["kv_cache_dtype"].map(lambda d: "fp8" if d == "fp8" else "bf16"),
            "batch": frame["batch_size"],
            "isl": cached,
            "heads": frame["num_heads"],
            "kv_heads": frame["num_key_value_heads"],
            "head_dim": frame["head_dim"],
            "kv_bytes": frame["kv_cache_dtype"].map(lambda d: KV_BYTES.get(d, 2)),
            "seconds": frame["latency"] / 1e3,
        }
    )


def _allreduce(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame[frame["backend"].str.contains("graph")]
    return pd.DataFrame(
        {
            "op": "allreduce",
            "dtype": "bf16",
            "ranks": frame["num_gpus"].astype(int),
            "message_bytes": frame["message_size"] * 2,
            "seconds": frame["latency"] / 1e3,
        }
    )


# (the table's moe_dtype, the kernel_source word it must hold) -> the curve's dtype
MOE_KERNELS = {("bfloat16", "fused_moe"): "bf16", ("fp8_block", "fused_moe"): "fp8", ("int4_wo", "marlin"): "int4"}


def _moe(frame: pd.DataFrame) -> pd.DataFrame:
    keep = (frame["moe_ep_size"] == 1) & (frame["distribution"] == "balanced")
    kinds = pd.Series("", index=frame.index)
    for (table_dtype, kernel), dtype in MOE_KERNELS.items():
        kinds = kinds.mask((frame["moe_dtype"] == table_dtype) & frame["kernel_source"].str.contains(kernel), dtype)
    frame, kinds = frame[keep & (kinds != "")], kinds[keep & (kinds != "")]
    rows = frame["num_tokens"] * frame["topk"]
    return pd.DataFrame(
        {
            "op": "moe",
            "dtype": kinds,
            "tokens": frame["num_tokens"],
            "top_k": frame["topk"],
            "experts": frame["num_experts"],
            "hit": rows.where(rows < frame["num_experts"], frame["num_experts"]),
            "hidden": frame["hidden_size"],
            "inter": frame["inter_size"] // frame["moe_tp_size"],
            "seconds": frame["latency"] / 1e3,
        }
    )


# Tables that disagree with their own GPU, left out of the fits (the class then uses the roofline), keyed by
# (system folder, the table's path below it, operator class). The evidence is recomputed from the tables by
# tests/calibration/test_fit.py.
EXCLUDED_TABLES = {
    ("h200_sxm", "gemm/vllm-0.14.0/gemm_perf.parquet", "gemm/fp8"): (
        "H200's fp8 GEMMs in this vLLM 0.14 table run compute-bound shapes (m, n, k >= 4096) at 0.72x the H100 "
        "table's throughput while its bf16 GEMMs run at 0.98x, on the same GH100 die, and memory-bound ones "
        "(m <= 16) no faster than H100's though H200's memory is 1.43x faster: a slower fp8 kernel path than the "
        "one vLLM serves with (aiconfigurator-core's vLLM 0.24 H200 table runs fp8 at 1.13x H100's there), and "
        "H200's end-to-end measurements side with the roofline (docs/accuracy.md, the public closed-loop points)"
    ),
}


def _read(folder: Path, name: str) -> tuple[pd.DataFrame, str] | None:
    """The newest table of this name and its path below `folder`: <engine>-<version>/ (the shared copy), else
    vllm/<version>/, else any <engine>/<version>/ (aiconfigurator-core)."""
    files = (
        sorted(folder.glob(f"*/{name}")) or sorted(folder.glob(f"vllm/*/{name}")) or sorted(folder.glob(f"*/*/{name}"))
    )
    return (pd.read_parquet(files[-1]), files[-1].relative_to(folder).as_posix()) if files else None


def _screened(system: str, kind: str, where: str, table: pd.DataFrame, excluded: dict[str, str]) -> pd.DataFrame:
    """The converted table without the classes EXCLUDED_TABLES names for it, each reason added to `excluded`."""
    for (folder, path, key), reason in EXCLUDED_TABLES.items():
        op, dtype = key.split("/")
        if (folder, path) == (system, f"{kind}/{where}") and ((table["op"] == op) & (table["dtype"] == dtype)).any():
            table = table[~((table["op"] == op) & (table["dtype"] == dtype))]
            excluded[key] = reason
    return table


def _system_tables(base: Path) -> pd.DataFrame | None:
    """One system folder's tables in the common format (None without any), less EXCLUDED_TABLES."""
    parts: list[pd.DataFrame] = []
    excluded: dict[str, str] = {}
    for kind, name, convert in (
        ("gemm", "gemm_perf.parquet", _gemm),
        ("attention", "context_attention_perf.parquet", lambda f: _attention(f, "prefill_attention")),
        ("attention", "generation_attention_perf.parquet", lambda f: _attention(f, "decode_attention")),
        ("comm", "custom_allreduce_perf.parquet", _allreduce),
        ("moe", "moe_perf.parquet", _moe),
    ):
        found = _read(base / kind, name)
        if found is None:
            continue
        try:
            parts.append(_screened(base.name, kind, found[1], convert(found[0]), excluded))
        except KeyError as exc:
            raise InputError(str(base / kind), str(exc.args[0]), "column missing from kernel table") from None
    if not parts:
        return None
    table = pd.concat(parts, ignore_index=True)
    if excluded:
        table.attrs["excluded"] = excluded
    return table


def import_aiconfigurator(root: Path) -> dict[str, pd.DataFrame]:
    """GPU profile name -> normalized measurements, for every system folder under root that a hardware
    profile names (its aiconfigurator_system); `aiconfigurator-core` reads the installed package's tables."""
    if str(root) == AICONFIGURATOR_PACKAGE:
        root = aiconfigurator_core_tables()
    if not root.is_dir():
        raise InputError(str(root), "", "AIConfigurator table folder not found")
    tables = {}
    for base in sorted(p for p in root.iterdir() if p.is_dir()):
        gpu = hardware_for_system(base.name)
        if gpu is None:
            continue
        table = _system_tables(base)
        if table is not None:
            tables[gpu] = table
    if not tables:
        raise InputError(str(root), "", "no kernel tables found (no folder named by a profile's aiconfigurator_system)")
    return tables


VIDUR_GPUS = {"a100": "A100-SXM4-80GB", "h100": "H100-SXM5-80GB"}
VIDUR_GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


def import_vidur(root: Path) -> dict[str, pd.DataFrame]:
    """Vidur's operator profiles (../shared/data/kernels/vidur/compute/<gpu>/<org>/<model>/mlp.csv, MIT):
    each projection of a layer timed per token count and TP degree, medians in milliseconds, converted to
    GEMM rows (m = tokens; n, k from the model's widths over TP). Used to check, not to fit: an
    independent measurement of the same GEMMs the AIConfigurator tables cover."""
    compute = root / "compute"
    if not compute.is_dir():
        raise InputError(str(root), "", "not a Vidur profile folder (no compute/)")
    tables: dict[str, pd.DataFrame] = {}
    for gpu_dir, gpu in VIDUR_GPUS.items():
        frames = [_vidur_gemms(path) for path in sorted((compute / gpu_dir).glob("*/*/mlp.csv"))]
        if frames:
            tables[gpu] = pd.concat(frames, ignore_index=True)
    return tables


def _vidur_gemms(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    tp = frame["num_tensor_parallel_workers"]
    head_dim = frame["n_embd"] // frame["n_head"]
    up = frame["n_expanded_embd"] * frame["use_gated_mlp"].map({True: 2, False: 1}).fillna(1).astype(int)
    widths = {
        "attn_pre_proj": ((frame["n_head"] + 2 * frame["n_kv_head"]) * head_dim // tp, frame["n_embd"]),
        "attn_post_proj": (frame["n_embd"], frame["n_head"] * head_dim // tp),
        "mlp_up_proj": (up // tp, frame["n_embd"]),
        "mlp_down_proj": (frame["n_embd"], frame["n_expanded_embd"] // tp),
    }
    parts = []
    for op, (n, k) in widths.items():
        column = f"time_stats.{op}.median"
        if column not in frame.columns:
            continue
        parts.append(
            pd.DataFrame(
                {
                    "op": "gemm",
                    "dtype": "bf16",
                    "m": frame["num_tokens"],
                    "n": n,
                    "k": k,
                    "seconds": frame[column] / 1e3,
                    "source": f"{path.parent.parent.name}/{path.parent.name} {op}",
                }
            )
        )
    return pd.concat(parts, ignore_index=True).dropna()


SPLITWISE_GPUS = {"a100-80gb": "A100-SXM4-80GB", "h100-80gb": "H100-SXM5-80GB"}  # h100-80gb-pcap: power-capped
SPLITWISE_MODELS = {"llama2-70b": "Llama-2-70b-hf", "bloom-176b": "bloom-176b"}


def import_splitwise(path: Path) -> dict[str, pd.DataFrame]:
    """Splitwise's perf_model.csv (MIT): whole-model iteration times, not kernels. Each row is one run of
    `batch` prompts of `prompt_size` tokens then `token_size` decode steps, on `tensor_parallel` GPUs;
    prompt_time is the prefill iteration and token_time the mean decode iteration, in milliseconds.
    Converted to rows of op `prefill_step` / `decode_step` with model, tp, batch, isl, osl and seconds
    (the median of the repeats). Used to check whole iterations, not to fit."""
    if not path.is_file():
        raise InputError(str(path), "", "Splitwise perf_model.csv not found")
    raw = pd.read_csv(path)
    keys = ["hardware", "model", "tensor_parallel", "batch_size", "prompt_size", "token_size"]
    missing = sorted({*keys, "prompt_time", "token_time"} - set(raw.columns))
    if missing:
        raise InputError(str(path), ", ".join(missing), "column missing")
    raw = raw[raw["hardware"].isin(list(SPLITWISE_GPUS))]
    medians = raw.groupby(keys, as_index=False)[["prompt_time", "token_time"]].median()
    tables: dict[str, pd.DataFrame] = {}
    for hardware, frame in medians.groupby("hardware"):
        parts = [
            pd.DataFrame(
                {
                    "op": op,
                    "model": frame["model"].map(lambda m: SPLITWISE_MODELS.get(m, m)),
                    "tp": frame["tensor_parallel"].astype(int),
                    "batch": frame["batch_size"].astype(int),
                    "isl": frame["prompt_size"].astype(int),
                    "osl": frame["token_size"].astype(int),
                    "seconds": frame[column] / 1e3,
                }
            )
            for op, column in (("prefill_step", "prompt_time"), ("decode_step", "token_time"))
        ]
        tables[SPLITWISE_GPUS[str(hardware)]] = pd.concat(parts, ignore_index=True)
    return tables
