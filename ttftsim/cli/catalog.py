"""What the program knows, without simulating: model presets, hardware profiles, one iteration's time, the
memory plan, and the arithmetic behind the advice (`explain`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ttftsim.cli.app import WeightDtypeOption, app, console, deployment_from_options
from ttftsim.config.scenario import KernelCosts
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import all_profiles
from ttftsim.inputs.limits import Limits
from ttftsim.model.catalog import load_model, preset_names
from ttftsim.model.size import active_param_count, kv_bytes_per_token, param_count, weight_bytes
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.iteration import IterationModel
from ttftsim.perf.kv_groups import KvCacheGroups
from ttftsim.perf.memory import MemorySettings, plan_memory

MAX_TOKENS = Limits().tokens  # the inputs' limit on one request's tokens (docs/inputs.md)


@app.command()
def models() -> None:
    """List the model presets. A scenario's model: also takes a Hugging Face id (meta-llama/Llama-3.1-8B-Instruct,
    ...-FP8, ...-AWQ: the preset in that format) or the path to any model's config.json."""
    table = Table("preset", "params", "active", "layers", "heads/kv", "KV B/token (bf16)", "bf16 weights")
    for name in preset_names():
        spec = load_model(name)
        table.add_row(
            spec.name,
            f"{param_count(spec) / 1e9:.2f}B",
            f"{active_param_count(spec) / 1e9:.2f}B",
            str(spec.num_hidden_layers),
            f"{spec.num_attention_heads}/{'latent' if spec.is_mla else spec.num_key_value_heads}",
            f"{kv_bytes_per_token(spec, 'bf16'):,}",
            f"{weight_bytes(spec, 'bf16') / 1e9:.1f} GB",
        )
    console.print(table)


@app.command()
def hardware() -> None:
    """List the hardware profiles in hwprofiles/."""
    from ttftsim.calibration.costs import has_calibration

    table = Table("profile", "memory", "bandwidth", "bf16 dense", "fp8 dense", "TP link", "$/GPU-h", "kernel times")
    for hw in all_profiles():
        fp8 = f"{hw.peak_flops.fp8 / 1e12:.0f} TF" if hw.peak_flops.fp8 else "-"
        link = f"{hw.intra_node_link.kind} {hw.intra_node_link.bw_bytes_per_s / 1e9:.0f} GB/s"
        table.add_row(
            hw.name,
            f"{hw.memory_bytes / 2**30:.1f} GiB",
            f"{hw.mem_bw_bytes_per_s / 1e12:.2f} TB/s",
            f"{hw.peak_flops.bf16 / 1e12:.0f} TF",
            fp8,
            link,
            f"{hw.price_per_gpu_hour_usd:.2f}",
            "calibrated" if has_calibration(hw.name) else "roofline",
        )
    console.print(table)


@app.command()
def step(
    model: Annotated[str, typer.Option(help="Preset, Hugging Face id (org/name-FP8, ...) or path to config.json")],
    gpu: Annotated[str, typer.Option("--hardware", help="Hardware profile name or YAML path")],
    tp: Annotated[int, typer.Option(min=1, help="Tensor-parallel size")] = 1,
    prompt_tokens: Annotated[int, typer.Option(min=0, max=MAX_TOKENS, help="Tokens of one prefill in this step")] = 0,
    decode_seqs: Annotated[int, typer.Option(min=0, max=MAX_TOKENS, help="Decoding sequences in this step")] = 0,
    context_tokens: Annotated[
        int, typer.Option(min=0, max=MAX_TOKENS, help="KV context of each decoding sequence")
    ] = 1024,
    kernel_costs: Annotated[
        KernelCosts, typer.Option(help="auto (calibrated where the GPU has a fit), roofline, or calibrated")
    ] = "auto",
    weight_dtype: WeightDtypeOption = None,
    kv_dtype: Annotated[str, typer.Option(help="bf16, fp16 or fp8")] = "bf16",
) -> None:
    """Time of one engine iteration and its breakdown by operator (calibrated kernel times where the GPU
    has a calibration, as in simulate; --kernel-costs roofline for the uncalibrated roofline)."""
    from ttftsim.step_costs import kernel_costs_for

    deployment = deployment_from_options(model, gpu, tp, weight_dtype, kv_dtype)
    shape = BatchShape.from_sequences(
        [prompt_tokens] * (prompt_tokens > 0) + [1] * decode_seqs,
        [0] * (prompt_tokens > 0) + [context_tokens] * decode_seqs,
    )
    costs, note = kernel_costs_for(kernel_costs, deployment.hardware, "--kernel-costs")
    timing = IterationModel(deployment, costs).timing(shape)
    console.print(f"kernel times: {note}")
    table = Table("operator", "ms", "share")
    for name, seconds in sorted(timing.breakdown.items(), key=lambda item: -item[1]):
        table.add_row(name, f"{seconds * 1e3:.3f}", f"{seconds / max(timing.total_s, 1e-12):.1%}")
    table.add_row("total", f"{timing.total_s * 1e3:.3f}", "100%")
    console.print(table)


@app.command()
def memory(
    model: Annotated[str, typer.Option(help="Preset, Hugging Face id (org/name-FP8, ...) or path to config.json")],
    gpu: Annotated[str, typer.Option("--hardware", help="Hardware profile name or YAML path")],
    tp: Annotated[int, typer.Option(min=1, help="Tensor-parallel size")] = 1,
    pp: Annotated[int, typer.Option(min=1, help="Pipeline-parallel size (stages of TP GPUs)")] = 1,
    weight_dtype: WeightDtypeOption = None,
    kv_dtype: Annotated[str, typer.Option(help="bf16, fp16 or fp8")] = "bf16",
    gpu_memory_utilization: Annotated[float, typer.Option(min=0.05, max=1.0)] = 0.9,
    max_num_batched_tokens: Annotated[
        int | None, typer.Option(min=1, help="Default: vLLM's API-server default on this GPU")
    ] = None,
    max_num_seqs: Annotated[
        int | None, typer.Option(min=1, help="Default: vLLM's API-server default on this GPU")
    ] = None,
    max_model_len: Annotated[int | None, typer.Option(min=1, help="Default: the model's context length")] = None,
) -> None:
    """Per-GPU memory plan as vLLM computes it: weights, activations, reserves, KV blocks (with pipeline
    parallelism, on the stage with the fewest blocks: every stage gets that many)."""
    from ttftsim.config.engine import EngineArgs
    from ttftsim.config.engine_limits import default_limits
    from ttftsim.config.resolved_engine import mla_block_size

    deployment = deployment_from_options(model, gpu, tp, weight_dtype, kv_dtype, pp)
    context = deployment.model.max_position_embeddings
    if max_model_len is not None and max_model_len > context:  # vLLM refuses it (as simulate does)
        raise InputError(
            "--max-model-len", "", f"{max_model_len:,} exceeds {deployment.model.name}'s context ({context:,}): vLLM "
            "refuses it (VLLM_ALLOW_LONG_MAX_MODEL_LEN in a scenario's engine: allow_long_max_model_len)",
        )  # fmt: skip
    tokens, seqs = default_limits(deployment.hardware, EngineArgs().vllm_version)  # the modelled default version
    settings = MemorySettings(
        gpu_memory_utilization,
        max_num_batched_tokens or tokens,
        max_num_seqs or seqs,
        16 if (nope := deployment.model.mla_nope_dim) is None else mla_block_size(16, deployment.hardware, nope),
        max_model_len or deployment.model.max_position_embeddings,
    )
    plan = plan_memory(deployment, settings)
    table = Table("component (per GPU)", "GB")
    for label, value in (
        ("requested", plan.requested_bytes),
        ("weights", plan.weight_bytes),
        ("activation peak", plan.activation_bytes),
        ("non-torch", plan.non_torch_bytes),
        ("CUDA graphs", plan.cudagraph_bytes),
        ("KV cache", plan.kv_cache_bytes),
    ):
        table.add_row(label, f"{value / 1e9:.2f}")
    console.print(table)
    console.print(
        f"{plan.num_blocks:,} blocks of {plan.block_size} tokens = {plan.kv_capacity_tokens:,} tokens "
        f"(max_model_len {settings.max_model_len:,})"
    )
    groups = KvCacheGroups.of(deployment.model)
    if groups.windowed_groups:  # vLLM's log: num_gpu_blocks over the groups, the same "GPU KV cache size"
        console.print(
            f"vLLM's num_gpu_blocks: {plan.vllm_num_blocks(groups):,}, shared by {groups.full_groups} full-attention "
            f"and {groups.windowed_groups} sliding-window KV-cache groups of {groups.group_size} layers; a request "
            f"keeps only its last {groups.window:,} tokens in the sliding-window groups"
        )


explain_app = typer.Typer(help="The arithmetic behind the advice, done right.", no_args_is_help=True)
app.add_typer(explain_app, name="explain")


@explain_app.command("kv")
def explain_kv(
    model: Annotated[str, typer.Option(help="Preset or config.json")],
    tokens: Annotated[int, typer.Option(min=1, max=MAX_TOKENS, help="Tokens held")] = 32768,
    dtype: Annotated[str, typer.Option(help="bf16, fp16 or fp8")] = "bf16",
) -> None:
    """KV-cache bytes per token and for a number of tokens (GQA: KV heads, not query heads)."""
    from ttftsim.explain import kv_bytes

    if dtype not in ("bf16", "fp16", "fp8"):
        raise InputError("--dtype", "", f"unknown KV dtype {dtype!r}")
    r = kv_bytes(model, dtype, tokens)  # type: ignore[arg-type]
    console.print(
        f"{r['model']}: {r['formula']} = {r['bytes_per_token']:,} bytes/token "
        f"({r['bytes_per_token'] / 1024:,.0f} KiB); {tokens:,} tokens = {r['total_bytes'] / 1e9:,.2f} GB"
        + (f" ({r['window']})" if r["window"] else "")
    )


@explain_app.command("flops")
def explain_flops(
    model: Annotated[str, typer.Option(help="Preset or config.json")],
    tokens: Annotated[int, typer.Option(min=1, max=MAX_TOKENS, help="Prompt tokens")] = 5000,
) -> None:
    """Prefill FLOPs: 2 x parameters x tokens plus causal attention."""
    from ttftsim.explain import prefill_flops

    r = prefill_flops(model, tokens)
    console.print(
        f"{r['model']}, {tokens:,} tokens: 2 x {r['non_embedding_params'] / 1e9:.2f}B x {tokens:,} = "
        f"{r['dense_flops']:.3e} FLOPs; with attention and the LM head {r['total_flops']:.3e} "
        f"({r['total_flops'] / 1e12:,.0f} TFLOP)"
    )


@explain_app.command("decode")
def explain_decode(
    model: Annotated[str, typer.Option(help="Preset or config.json")],
    batch: Annotated[int, typer.Option(min=1, max=MAX_TOKENS, help="Sequences decoding together")] = 1,
    context: Annotated[int, typer.Option(min=1, max=MAX_TOKENS, help="Tokens of context per sequence")] = 1024,
) -> None:
    """Decode arithmetic intensity (FLOP per byte read), which grows with the batch."""
    from ttftsim.explain import decode_intensity

    for size in sorted({1, batch}):
        console.print(f"batch {size}: {decode_intensity(model, size, context):.1f} FLOP/byte")
