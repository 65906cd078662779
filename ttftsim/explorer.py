"""The dashboard explorer's run: a scenario from the explorer form's values (model, GPU, TP, engine knobs,
traffic, SLO), kept inside the dashboard's boundary (web/app.py): a model or GPU is a preset by name or a file
inside the results folder, whatever a request sends; at most MAX_REQUESTS requests. Plain Python (no Dash), so
the boundary is tested without a browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ttftsim.config.scenario import Scenario
from ttftsim.hardware.catalog import all_profiles
from ttftsim.model.catalog import preset_names
from ttftsim.results import ResultError, inside
from ttftsim.simulate import simulate

MAX_REQUESTS = 5000


def run_form(root: Path, form: tuple[Any, ...]) -> tuple[Any, ...]:
    """Simulate the scenario the form describes (model, GPU, TP, engine knobs, traffic, SLO)."""
    model, hardware, tp, seqs, batch, flags, rate, prompt, output, count, slo_ms = form
    if not all(isinstance(v, int | float) and v > 0 for v in (tp, rate, prompt, output, count, slo_ms)):
        raise ValueError("tensor parallel, rate, lengths, requests and SLO must be positive numbers")
    engine: dict[str, Any] = {
        "tensor_parallel_size": int(tp),
        "enable_chunked_prefill": "chunked" in (flags or []),
        "enable_prefix_caching": "prefix" in (flags or []),
    }
    if seqs:
        engine["max_num_seqs"] = int(seqs)
    if batch:
        engine["max_num_batched_tokens"] = int(batch)
    scenario = Scenario.model_validate(
        {
            "name": "explorer",
            "model": model_ref(root, model),
            "hardware": hardware_ref(root, hardware),
            "engine": engine,
            "workload": {
                "type": "synthetic",
                "arrivals": {"type": "poisson", "rate": float(rate)},
                "prompt_tokens": {"type": "lognormal", "mean": float(prompt), "std": float(prompt) * 0.8},
                "output_tokens": {"type": "lognormal", "mean": float(output), "std": float(output) * 0.75},
                "num_requests": min(int(count), MAX_REQUESTS),
            },
            "slo": {"ttft_p99_s": float(slo_ms) / 1e3},
        }
    )
    try:
        result = simulate(scenario)
    except Exception as exc:  # a configuration that does not fit, an inconsistent TP: shown in the page
        raise ValueError(str(exc)) from None
    return result.requests, result.summary(), result.time_series(), float(slo_ms) / 1e3


def model_ref(root: Path, value: Any) -> str:
    """A preset by name, or a config.json inside the results folder (by its resolved path): nothing else,
    whatever the request sends."""
    if isinstance(value, str) and value in preset_names():
        return value
    return file_inside(root, value, (".json",), "model", "a model preset or a config.json")


def hardware_ref(root: Path, value: Any) -> str:
    """A hardware profile by name, or a profile YAML inside the results folder (by its resolved path)."""
    if isinstance(value, str) and value in {profile.name for profile in all_profiles()}:
        return value
    return file_inside(root, value, (".yaml", ".yml"), "GPU", "a hardware profile or a profile YAML")


def file_inside(root: Path, value: Any, suffixes: tuple[str, ...], field: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field}: choose {what}")
    try:
        path = inside(root, value)
    except ResultError as exc:
        raise ValueError(f"{field} {exc}") from None
    if not path.is_file() or path.suffix not in suffixes:
        raise ValueError(f"{field} {value}: not {what} inside the results folder")
    return str(path)
