"""Command line: parse, load config, one library call, render. Exit 0 ok, 1 SLO/plan failure, 2 bad input.

Each command imports the library it calls inside its function: `ttftsim models` or `--help` should not pay
for importing the simulator, the planner or plotly (no command-local import here avoids a cycle: the import
contracts in .importlinter keep the layers acyclic)."""

from __future__ import annotations

import atexit
import gc
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ttftsim.config.dtypes import KvDtype, WeightDtype
from ttftsim.config.scenario import KernelCosts
from ttftsim.data_paths import data_folder
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import all_profiles, load_hardware
from ttftsim.model.catalog import load_model, preset_names
from ttftsim.model.size import active_param_count, kv_bytes_per_token, param_count, weight_bytes
from ttftsim.perf.batch import BatchShape
from ttftsim.perf.iteration import Deployment, IterationModel
from ttftsim.perf.memory import DoesNotFitError, MemorySettings, plan_memory
from ttftsim.render import render_accuracy, render_compare, render_plan, render_summary, render_validation

app = typer.Typer(
    name="ttftsim",
    help="Predict the time-to-first-token distribution of an LLM serving deployment before it exists.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console() if sys.stdout.isatty() else Console(width=160)
WeightDtypeOption = Annotated[
    str | None,
    typer.Option(help="bf16, fp16, fp8, int8 or int4 (default: the checkpoint's; fp8 for an id ending in -FP8)"),
]
MaxRequests = Annotated[
    int | None,
    typer.Option(help="Most requests one simulation may send (default 2,000,000; docs/inputs.md lists every limit)"),
]


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
            f"{spec.num_attention_heads}/{spec.num_key_value_heads}",
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
    prompt_tokens: Annotated[int, typer.Option(min=0, help="Tokens of one prefill in this step")] = 0,
    decode_seqs: Annotated[int, typer.Option(min=0, help="Decoding sequences in this step")] = 0,
    context_tokens: Annotated[int, typer.Option(min=0, help="KV context of each decoding sequence")] = 1024,
    kernel_costs: Annotated[
        KernelCosts, typer.Option(help="auto (calibrated where the GPU has a fit), roofline, or calibrated")
    ] = "auto",
    weight_dtype: WeightDtypeOption = None,
    kv_dtype: Annotated[str, typer.Option(help="bf16, fp16 or fp8")] = "bf16",
) -> None:
    """Time of one engine iteration and its breakdown by operator (calibrated kernel times where the GPU
    has a calibration, as in simulate; --kernel-costs roofline for the uncalibrated roofline)."""
    from ttftsim.replica import kernel_costs_for

    deployment = _deployment(model, gpu, tp, weight_dtype, kv_dtype)
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
    weight_dtype: WeightDtypeOption = None,
    kv_dtype: Annotated[str, typer.Option(help="bf16, fp16 or fp8")] = "bf16",
    gpu_memory_utilization: Annotated[float, typer.Option(min=0.05, max=1.0)] = 0.9,
    max_num_batched_tokens: Annotated[int, typer.Option(min=1)] = 2048,
    max_num_seqs: Annotated[int, typer.Option(min=1)] = 256,
    max_model_len: Annotated[int, typer.Option(min=1)] = 4096,
) -> None:
    """Per-GPU memory plan as vLLM computes it: weights, activations, reserves, KV blocks."""
    deployment = _deployment(model, gpu, tp, weight_dtype, kv_dtype)
    settings = MemorySettings(gpu_memory_utilization, max_num_batched_tokens, max_num_seqs, 16, max_model_len)
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
    console.print(f"{plan.num_blocks:,} blocks of {plan.block_size} tokens = {plan.kv_capacity_tokens:,} tokens")


@app.command()
def simulate(
    scenario: Annotated[Path, typer.Argument(help="Scenario YAML: model, hardware, engine, workload")],
    seed: Annotated[int | None, typer.Option(help="Random seed (default: the scenario's)")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write requests, iterations, time series, summary here; the wall time goes to run.json"),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the summary as JSON on stdout (the same bytes for the same seed)")
    ] = False,
    max_requests: MaxRequests = None,
) -> None:
    """Simulate one replica under a workload. Exit 1 when the scenario's slo.ttft_p99_s is not met.
    --json and summary.json hold only what the scenario and seed determine (identical bytes run after run);
    the wall time is in the human output and in run.json; anything read but not modelled is in warnings."""
    from ttftsim.metrics.export import write_results
    from ttftsim.result_folder import check_target
    from ttftsim.run_info import write_run_info
    from ttftsim.simulate import load_scenario
    from ttftsim.simulate import simulate as run

    _request_limit(max_requests)
    spec = load_scenario(scenario)
    if out is not None:
        check_target(out)  # a bad --out is said before the run, not after it
    with _progress(enabled=not as_json) as report:
        result = run(spec, scenario.parent, seed, progress=report, source=str(scenario))
    summary = result.summary()
    if out is not None:
        write_results(out, result.requests, result.steps, result.time_series(), summary.to_json(), result.prometheus())
        write_run_info(out, result.run_info())
    if as_json:
        sys.stdout.write(json.dumps(summary.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        render_summary(console, summary, result.wall_s)
    if summary.slo is not None and not summary.slo.met:
        raise typer.Exit(1)


@app.command()
def plan(
    plan_file: Annotated[Path, typer.Argument(help="Plan YAML: model, traffic, SLOs, the space to search")],
    workers: Annotated[int, typer.Option(min=1, help="Candidates simulated in parallel")] = 2,
    backend: Annotated[str, typer.Option(help="local (processes) or ray")] = "local",
    out: Annotated[
        Path | None,
        typer.Option(help="Where results, manifests and the checkpoint go; tasks computed or reused: run.json"),
    ] = None,
    resume: Annotated[bool, typer.Option(help="Reuse the checkpoint of an interrupted run in --out")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON on stdout (the same bytes for the same seed)")
    ] = False,
    max_requests: MaxRequests = None,
) -> None:
    """Find the cheapest deployments that meet the SLOs. Exit 1 when none does (what came closest is shown).
    --json and plan.json are identical for the same plan and seed, fresh or resumed; the tasks computed and
    taken from the checkpoint are in the human output and in run.json."""
    from ttftsim.plan.run import run_plan
    from ttftsim.result_folder import check_target

    _request_limit(max_requests)
    if backend not in ("local", "ray"):
        raise InputError("--backend", "", f"unknown backend {backend!r} (local or ray)")
    if backend == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise InputError("--backend", "", "ray is not installed (pip install 'ttftsim[dist]')") from None
    folder = out or Path(f"plan-{plan_file.stem}")
    check_target(folder)
    with _plan_progress(enabled=not as_json) as report:
        result = run_plan(plan_file, folder, workers, backend, resume, report)
    if as_json:
        sys.stdout.write(json.dumps(result.as_json(), indent=1) + "\n")
    else:
        render_plan(console, result, folder)
    if result.winner is None:
        raise typer.Exit(1)


@contextmanager
def _plan_progress(enabled: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, object] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)  # type: ignore[arg-type]

        yield update


@app.command()
def validate(
    deploy: Annotated[Path, typer.Argument(help="Deployment file: traffic, SLO, and manifests or engine arguments")],
    manifest: Annotated[list[Path] | None, typer.Option(help="Kubernetes manifest (repeatable)")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print findings, warnings and prediction as JSON (deterministic)")
    ] = False,
    max_requests: MaxRequests = None,
) -> None:
    """Check a deployment (memory, KV, TP, GPU requests and affinity, probes, HPA) and predict its TTFT.
    Exit 0 pass, 1 a finding is an error, 2 invalid input. What the manifests or the model set that is not
    modelled (pipeline parallelism, a sliding window, unknown vLLM flags) is a warning; it never fails a run."""
    from ttftsim.validate.run import validate as check

    _request_limit(max_requests)
    report = check(deploy, list(manifest or []))
    if as_json:
        sys.stdout.write(json.dumps(report.as_json(), indent=1, default=str) + "\n")
    else:
        render_validation(console, report)
    if not report.passed:
        raise typer.Exit(1)


@app.command()
def compare(
    first: Annotated[Path, typer.Argument(help="Scenario A (its traffic is used for both)")],
    second: Annotated[Path, typer.Argument(help="Scenario B")],
    seed: Annotated[int | None, typer.Option(help="Random seed (default: A's)")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as JSON (the same bytes for the same seed)")
    ] = False,
    max_requests: MaxRequests = None,
) -> None:
    """The same traffic through two scenarios: TTFT percentiles, TPOT, throughput, cost, TTFT breakdown."""
    from ttftsim.compare import compare as run

    _request_limit(max_requests)
    result = run(first, second, seed)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    else:
        render_compare(console, result)


@app.command()
def schema(
    out: Annotated[Path | None, typer.Option(help="Write <input>.schema.json files here")] = None,
    check: Annotated[bool, typer.Option(help="Exit 1 if docs/config.md or docs/cli.md are out of date")] = False,
    docs: Annotated[Path, typer.Option(help="Folder of config.md and cli.md")] = Path("docs"),
) -> None:
    """JSON Schemas of every input file, and docs/config.md and docs/cli.md generated from them."""
    from ttftsim.docs import drift, write

    if check:
        stale = drift(docs, app)
        for path in stale:
            console.print(f"[red]out of date:[/] {path} (run `ttftsim schema`)")
        if stale:
            raise typer.Exit(1)
        console.print("docs match the schemas and the CLI")
        return
    for written in write(out, docs, app):
        console.print(f"wrote {written}")


@app.command()
def advice(
    claims: Annotated[Path, typer.Option(help="The claims and their scenario pairs")] = Path(
        "examples/advice/claims.yaml"
    ),
    out: Annotated[Path, typer.Option(help="The report to write")] = Path("docs/advice.md"),
    pairs: Annotated[Path, typer.Option(help="Where each run's before/after scenarios go")] = Path(
        "examples/advice/pairs"
    ),
    quick: Annotated[bool, typer.Option(help="Shortened traffic (for CI): indicative numbers only")] = False,
    only: Annotated[str | None, typer.Option(help="Comma-separated claim numbers")] = None,
) -> None:
    """Run every claim of the common TTFT advice as before/after pairs and write the verdicts."""
    from ttftsim.advice import write_advice

    wanted = None
    if only:
        try:
            wanted = {int(part) for part in only.split(",")}
        except ValueError:
            raise InputError("--only", "", f"expects claim numbers like 1,15,17, got {only!r}") from None
    results = write_advice(claims, out, pairs, quick, wanted)
    for item in results:
        claim = item["claim"]
        verdicts = "; ".join(run["verdict"] for run in item["runs"]) or "not modelled"
        console.print(f"{claim.id:>2}. {claim.title}: {verdicts}", highlight=False)
    console.print(f"wrote {out} and {pairs}/")


explain_app = typer.Typer(help="The arithmetic behind the advice, done right.", no_args_is_help=True)
app.add_typer(explain_app, name="explain")


@explain_app.command("kv")
def explain_kv(
    model: Annotated[str, typer.Option(help="Preset or config.json")],
    tokens: Annotated[int, typer.Option(min=1, help="Tokens held")] = 32768,
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
    )


@explain_app.command("flops")
def explain_flops(
    model: Annotated[str, typer.Option(help="Preset or config.json")],
    tokens: Annotated[int, typer.Option(min=1, help="Prompt tokens")] = 5000,
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
    batch: Annotated[int, typer.Option(min=1, help="Sequences decoding together")] = 1,
    context: Annotated[int, typer.Option(min=1, help="Tokens of context per sequence")] = 1024,
) -> None:
    """Decode arithmetic intensity (FLOP per byte read), which grows with the batch."""
    from ttftsim.explain import decode_intensity

    for size in sorted({1, batch}):
        console.print(f"batch {size}: {decode_intensity(model, size, context):.1f} FLOP/byte")


@app.command()
def dashboard(
    results: Annotated[
        Path, typer.Argument(help="Folder of results (simulate --out, plan --out, accuracy JSON)")
    ] = Path("."),
    host: Annotated[str, typer.Option(help="Interface to bind (default: this machine only)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port")] = 8050,
) -> None:
    """The dashboard: scenario explorer, plan, compare and accuracy views over a results folder."""
    if not results.is_dir():
        raise InputError(str(results), "", "results folder not found")
    app_module = _web_app()
    app_module.create_app(results.resolve()).run(host=host, port=port, debug=False)


@app.command()
def report(
    results: Annotated[Path, typer.Argument(help="Folder of results")],
    output: Annotated[Path, typer.Option("-o", "--output", help="HTML file to write")] = Path("report.html"),
) -> None:
    """Every result in the folder as figures in one self-contained HTML file (plotly.js embedded)."""
    from ttftsim.results import write_report

    if not results.is_dir():
        raise InputError(str(results), "", "results folder not found")
    problems = write_report(results, output)
    for problem in problems:
        console.print(f"[yellow]not shown:[/] {problem}", highlight=False)
    console.print(f"wrote {output}")


def _device_sweep() -> Path:
    """calibration/sweep.py (the checkout's, or a wheel's copy); refuses cleanly without torch, triton or a
    CUDA GPU."""
    try:
        import torch
    except ImportError:
        raise InputError("--device", "", "torch is not installed (pip install 'ttftsim[calibrate]')") from None
    if not torch.cuda.is_available():
        raise InputError("--device", "", "no CUDA GPU on this machine: the sweep times kernels on a GPU")
    root = str(data_folder("calibration").parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from calibration.sweep import run as sweep

    result: Path = sweep()
    return result


def _web_app() -> Any:
    """web/app.py, the Dash app (the repository's web/ folder, or a wheel's copy)."""
    import importlib.util

    path = data_folder("web") / "app.py"
    try:
        import dash  # noqa: F401
    except ImportError:
        raise InputError("dashboard", "", "Dash is not installed (pip install 'ttftsim[web]')") from None
    spec = importlib.util.spec_from_file_location("ttftsim_web_app", path)
    if spec is None or spec.loader is None or not path.exists():
        raise InputError(str(path), "", "the dashboard's web/app.py is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@app.command()
def accuracy(
    ground_truth: Annotated[
        Path,
        typer.Argument(
            help="Measured runs: a benchmark report (vllm bench serve, GuideLLM, aiperf, genai-perf, vLLM /metrics, "
            "Prometheus query_range; told by content) or open-loop JSON / closed-loop CSV"
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print results and summary as JSON (the same bytes every run)")
    ] = False,
    kernel_costs: Annotated[
        KernelCosts,
        typer.Option(help="Kernel times: calibrated where the GPU has a fit (auto), the roofline, or calibrated"),
    ] = "auto",
    deployment: Annotated[
        Path | None,
        typer.Option(
            help="A report's deployment: a scenario file (model, hardware, engine); the report's workload "
            "replaces its own"
        ),
    ] = None,
    before: Annotated[
        Path | None,
        typer.Option(
            help="A /metrics snapshot taken before the run: with a /metrics report, the run is the difference"
        ),
    ] = None,
) -> None:
    """Simulate measured deployments and compare predicted with measured TTFT (and TPOT)."""
    from ttftsim.accuracy.ground_truth import case_notes, with_kernel_costs
    from ttftsim.accuracy.harness import as_json as to_json
    from ttftsim.accuracy.harness import run_all, summarize
    from ttftsim.accuracy.reports import measured_cases

    with measured_cases(ground_truth, deployment, before) as (cases, base):
        results, skipped = run_all(with_kernel_costs(cases, kernel_costs), base)
    summary = summarize(results)
    notes = case_notes(cases)
    if as_json:
        payload = to_json(results, summary, skipped) | {"notes": notes}
        sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    else:
        render_accuracy(console, results, summary)
        for name, reason in skipped:
            console.print(f"[yellow]skipped[/] {name}: {reason}", markup=True, highlight=False)
        for note in notes:
            console.print(f"note: {note}", markup=False, highlight=False)
    if not results:
        raise typer.Exit(1)


@app.command()
def calibrate(
    source: Annotated[
        Path | None, typer.Option("--from", help="Folder of AIConfigurator kernel tables (per-GPU folders)")
    ] = None,
    device: Annotated[bool, typer.Option("--device", help="Time our Triton kernels on this machine's GPU")] = False,
    out: Annotated[Path | None, typer.Option(help="Where fits go (default: calibration/fits/)")] = None,
) -> None:
    """Fit per-operator cost curves to measured kernel tables (--from), or run the device sweep on a GPU
    (--device: writes calibration/results/<gpu>.json)."""
    from ttftsim.calibration.costs import FITS_DIR
    from ttftsim.calibration.fit import calibrate as fit_all
    from ttftsim.calibration.tables import import_aiconfigurator

    if device == (source is not None):
        raise InputError("calibrate", "", "give exactly one of --from TABLES or --device")
    if device:
        console.print(f"wrote {_device_sweep()}")
        return
    assert source is not None
    folder = out or FITS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for gpu, table in import_aiconfigurator(source).items():
        calibration = fit_all(table, load_hardware(gpu))
        path = folder / f"{gpu.lower()}.json"
        provenance = {
            "source": "AIConfigurator kernel tables (Apache-2.0)",
            "tables": str(source),
            "hold_out": "every 5th shape of each table",
        }
        path.write_text(
            json.dumps({"gpu": gpu, "provenance": provenance, **calibration}, sort_keys=True) + "\n",
            encoding="utf-8",
        )
        console.print(f"{gpu}: {len(calibration['fits'])} curves -> {path}")


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[float], None] | None]:
    """A progress bar on stderr for long runs (only on a terminal)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("simulating", total=1.0)
        yield lambda fraction: bar.update(task, completed=fraction)


def _deployment(model: str, gpu: str, tp: int, weight_dtype: str | None, kv_dtype: str) -> Deployment:
    from typing import get_args

    if weight_dtype is not None and weight_dtype not in get_args(WeightDtype):
        raise InputError("--weight-dtype", "", f"unknown weight dtype {weight_dtype!r}")
    if kv_dtype not in get_args(KvDtype):
        raise InputError("--kv-dtype", "", f"unknown KV dtype {kv_dtype!r}")
    spec = load_model(model, "--model")
    weights = weight_dtype or spec.native_dtype
    try:
        return Deployment(spec, load_hardware(gpu, "--hardware"), tp, weights, kv_dtype)  # type: ignore[arg-type]
    except ValueError as exc:
        raise InputError("--tp", "", str(exc)) from None


def _request_limit(value: int | None) -> None:
    """--max-requests, for this process and the plan's workers (TTFTSIM_MAX_REQUESTS; ttftsim/inputs/limits.py)."""
    from ttftsim.inputs.limits import set_request_limit

    if value is not None and value < 1:
        raise InputError("--max-requests", "", f"expects a positive number of requests, got {value}")
    set_request_limit(value)


def _fail(line: str) -> None:
    sys.stderr.write(line.replace("\n", " ") + "\n")


def _warn_one_line(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    _fail(f"warning: {message}")


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2 (usage errors too);
    warnings (e.g. a shape outside the calibrated range) one line each. At exit the garbage collector's
    last full pass over everything still alive is skipped (gc.freeze): a tenth of a second after a large
    run, and the process is ending anyway (atexit handlers and open files still close as usual)."""
    warnings.showwarning = _warn_one_line
    atexit.register(gc.freeze)
    try:
        code = app(standalone_mode=False)  # click's errors come here as exceptions, not as a framed box
    except typer.Abort:  # end of input at a prompt
        _interrupted()
    except SystemExit as exc:
        if exc.code == 130:  # Ctrl-C inside a command that exits 130 itself
            _interrupted()
        raise
    except InputError as exc:
        _fail(f"error: {exc.one_line()}")
        sys.exit(2)
    except DoesNotFitError as exc:
        _fail(f"error: does not fit: {exc}")
        sys.exit(2)
    except OSError as exc:  # a path the user gave that the system refuses (a name too long, no permission)
        where = InputError(str(exc.filename or "input"), "", exc.strerror or exc.__class__.__name__)
        _fail(f"error: {where.one_line()}")
        sys.exit(2)
    except Exception as exc:
        _usage_error(exc)
        raise
    if code == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into Exit(130), here a return value
        _interrupted()
    if isinstance(code, int) and code:  # a command's typer.Exit(code)
        sys.exit(code)


def _usage_error(exc: Exception) -> None:
    """Click's usage errors (an unknown option or command, a bad or missing value; typer vendors click, so
    the classes are known by name) as one line and exit 2; a bare command prints its help, exit 2."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "UsageError" not in names:
        return
    ctx = getattr(exc, "ctx", None)
    if "NoArgsIsHelpError" in names and ctx is not None:
        typer.echo(ctx.get_help(), err=True)
        sys.exit(2)
    where = ctx.command_path if ctx is not None else "ttftsim"
    _fail(f"error: {where}: {exc.format_message()} (see {where} --help)")  # type: ignore[attr-defined]
    sys.exit(2)


def _interrupted() -> None:
    _fail("interrupted: results are written only once complete; a plan keeps its checkpoint (--resume)")
    sys.exit(130)
