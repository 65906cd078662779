"""Measured against reality: `accuracy` (simulate measured runs and compare) and `calibrate` (fit kernel
cost curves to measured tables, or time the kernels on this machine's GPU)."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from ttftsim.cli.app import app, console, phase_progress
from ttftsim.config.scenario import KernelCosts
from ttftsim.data_paths import data_folder
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.render.accuracy import render_accuracy


@app.command()
def accuracy(
    ground_truth: Annotated[
        Path,
        typer.Argument(
            help="Measured runs: a benchmark report (vllm bench serve, GuideLLM, inference-perf's folder, aiperf, "
            "genai-perf, vLLM /metrics, Prometheus query_range; told by content) or open-loop JSON / closed-loop CSV"
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
    server_metrics: Annotated[
        Path | None,
        typer.Option(
            help="The server's /metrics after a client report's run (with --server-before: before it): vLLM's TTFT "
            "beside the client's and the prediction, the frontend/network share, the histograms side by side"
        ),
    ] = None,
    server_before: Annotated[Path | None, typer.Option(help="The server's /metrics before the run")] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1, max=1024, help="Measured runs simulated in parallel (at most one per CPU; the same results)"
        ),
    ] = 2,
) -> None:
    """Simulate measured deployments and compare predicted with measured TTFT (and TPOT)."""
    from ttftsim.accuracy.ground_truth import case_notes, with_kernel_costs
    from ttftsim.accuracy.harness import as_json as to_json
    from ttftsim.accuracy.harness import run_all, summarize
    from ttftsim.accuracy.reports import measured_cases
    from ttftsim.accuracy.server_view import server_views, table_lines

    with measured_cases(ground_truth, deployment, before) as (cases, base), phase_progress(not as_json) as progress:
        results, skipped = run_all(with_kernel_costs(cases, kernel_costs), base, progress, workers)
        views = server_views(with_kernel_costs(cases, kernel_costs), base, server_metrics, server_before)
    summary = summarize(results)
    notes = case_notes(cases, kernel_costs)
    if as_json:
        payload = to_json(results, summary, skipped) | {"notes": notes}
        if views:
            payload["server_view"] = [asdict(view) | {"frontend_share": view.frontend_share()} for view in views]
        sys.stdout.write(json.dumps(_finite(payload), indent=2, sort_keys=True, allow_nan=False) + "\n")
    else:
        render_accuracy(console, results, summary)
        for name, reason in skipped:
            console.print(f"[yellow]skipped[/] {name}: {reason}", markup=True, highlight=False)
        for note in notes:
            console.print(f"note: {note}", markup=False, highlight=False)
        for line in (line for view in views for line in table_lines(view)):
            console.print(line, markup=False, highlight=False)
    if not results:
        raise typer.Exit(1)


@app.command()
def calibrate(
    source: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Folder of AIConfigurator kernel tables (per-system folders), or aiconfigurator-core for the "
            "installed package's (pip install 'ttftsim\\[aiconfigurator]')",
        ),
    ] = None,
    device: Annotated[bool, typer.Option("--device", help="Time our Triton kernels on this machine's GPU")] = False,
    out: Annotated[Path | None, typer.Option(help="Where fits go (default: calibration/fits/)")] = None,
) -> None:
    """Fit per-operator cost curves to measured kernel tables (--from), or run the device sweep on a GPU
    (--device: writes calibration/results/<gpu>.json)."""
    from ttftsim.calibration.costs import FITS_DIR
    from ttftsim.calibration.fit import calibrate as fit_all
    from ttftsim.calibration.tables import describe_tables, import_aiconfigurator

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
            "tables": describe_tables(source),
            "hold_out": "every 5th shape of each table",
        }
        if table.attrs.get("excluded"):
            provenance["excluded"] = table.attrs["excluded"]
        path.write_text(
            json.dumps({"gpu": gpu, "provenance": provenance, **calibration}, sort_keys=True) + "\n",
            encoding="utf-8",
        )
        console.print(f"{gpu}: {len(calibration['fits'])} curves -> {path}")


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


def _finite(value: Any) -> Any:
    """The payload with every NaN or infinite number as null: strict JSON (a figure the run does not define, such
    as TPOT of one-token outputs, was written NaN, which JSON parsers other than Python's refuse)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
