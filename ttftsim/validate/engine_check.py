"""The engine as vLLM would start it on one replica: a model it can read (not a path inside the container), tensor
parallelism that divides the attention heads, weights and KV cache that fit the GPU memory, engine arguments the
engine accepts (named as the manifests' vllm flags where they came from there), and the KV cache's capacity against
max_model_len x max_num_seqs. It hands the replica it built to the later checks; without a hardware profile it stops
after the heads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ttftsim.config.deploy import Deploy
from ttftsim.engine.step_plan import rejection
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import UNMODELLED_FORMAT, load_model
from ttftsim.model.spec import ModelSpec
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.replica import Replica, build_replica, resolve_ref
from ttftsim.validate.report import Report
from ttftsim.validate.target import Target, scenario_for
from ttftsim.validate.vllm_args import flag_of
from ttftsim.workload.request import Request

# model errors about a name the manifests' vllm command gave: named there, with the deploy file's override
UNKNOWN_MODEL_ERRORS = ("unknown model", UNMODELLED_FORMAT)


def check_engine(report: Report, deploy: Deploy, target: Target, base: Path, source: str) -> Any:
    model = _load_model(deploy, target, base, source)
    tp = target.engine.tensor_parallel_size
    if model.num_attention_heads % tp:
        report.add(
            "error",
            "tp-vs-heads",
            f"--tensor-parallel-size {tp} does not divide {model.name}'s {model.num_attention_heads} attention heads; "
            "vLLM refuses to start",
            f"use a TP that divides {model.num_attention_heads}",
        )
        return None
    if target.hardware is None:
        return None
    hardware = load_hardware(resolve_ref(target.hardware, base), source)
    replica = _build(report, deploy, target, base, source)
    if replica is None:
        return None
    _check_kv_capacity(report, replica, hardware.name)
    return replica


def _load_model(deploy: Deploy, target: Target, base: Path, source: str) -> ModelSpec:
    """The model to predict with; a name the manifests' vllm command gave that ttftsim cannot read is an input
    error naming that command, with the deployment file's model: as the way out."""
    if deploy.model is None and target.serving is not None and target.model.startswith(("/", ".", "~")):
        raise InputError(  # a path in the container: the machine running validate has other files there
            target.serving.source,
            "vllm serve",
            f"the model {target.model} is a path inside the container, not read from this machine; name the model "
            f"in {source} (model: a Hugging Face id or a preset, ttftsim models)",
        )
    try:
        return load_model(resolve_ref(target.model, base), source)
    except InputError as exc:
        if deploy.model is not None or target.serving is None or not exc.message.startswith(UNKNOWN_MODEL_ERRORS):
            raise  # a config.json's own error names its file and field
        # the name came from the manifests' vllm command (KServe serves a local path such as /mnt/models)
        raise InputError(
            target.serving.source,
            "vllm serve",
            f"{exc.message}; name the model in {source} (model: a Hugging Face id or a preset, ttftsim models)",
        ) from None


def _build(report: Report, deploy: Deploy, target: Target, base: Path, source: str) -> Replica | None:
    """One replica as vLLM would start it; None, with an error finding, where it does not fit or an engine
    argument is refused."""
    scenario = scenario_for(deploy, target, 1)
    try:
        return build_replica(scenario, base, source)
    except DoesNotFitError as exc:
        where = f"{target.serving.kind}/{target.serving.name} ({target.serving.source}): " if target.serving else ""
        share = target.engine.gpu_memory_utilization  # set below vLLM's defaults (0.9, 0.92): the first thing to raise
        raise_share = f"raise --gpu-memory-utilization ({share:g}), " if share is not None and share < 0.9 else ""
        lora = "lower --max-loras or --max-lora-rank, " if target.engine.enable_lora else ""
        fix = f"{raise_share}{lora}raise tensor parallelism, quantize, or lower max_model_len"
        report.add("error", "memory-fit", f"{where}does not fit: {exc}", fix)
        return None
    except InputError as exc:
        if exc.source == source and exc.field == "engine.calibration":  # the deploy file's own field
            exc = InputError(source, "calibration", exc.message)
        elif exc.source == source and exc.field.startswith("engine") and target.serving is not None:
            # the engine arguments came from the manifests' vllm command line, not from the deployment file
            parts = exc.field.split(".")  # engine.<dest> is a flag; deeper fields (LMCACHE_* env, JSON keys) are not
            flag = flag_of(parts[1]) if len(parts) == 2 else "vllm serve"
            exc = InputError(target.serving.source, flag, exc.message)
        report.add("error", "engine", exc.one_line())  # names the file and field (a calibration file, ...)
        return None


def _check_kv_capacity(report: Report, replica: Replica, hardware_name: str) -> None:
    """The KV cache's capacity against max_model_len x max_num_seqs (info), and a warning where one request of
    max_model_len tokens can never be held."""
    engine = replica.engine
    capacity = replica.num_blocks * engine.block_size
    worst = engine.max_model_len * engine.max_num_seqs
    report.add(
        "info",
        "kv-capacity",
        f"KV cache {capacity:,} tokens on {engine.rank_gpus} x {hardware_name}"
        + (f" (each of {engine.dp} data-parallel engines)" if engine.dp > 1 else "")
        + f"; max_model_len x max_num_seqs = {worst:,}",
    )
    longest = Request(0, 0.0, engine.max_model_len - 1, 1, ((0, engine.max_model_len - 1),))
    if engine.windowed_kv is not None and (why := rejection(engine, replica.num_blocks, longest)):
        # vLLM 0.15.1's start-up check sizes one sequence by the first (sliding-window) group: it starts
        report.add(
            "warning",
            "kv-capacity",
            f"one request of max_model_len {engine.max_model_len:,} tokens cannot be held: {why}; vLLM starts (its "
            "check sizes a sequence by the sliding-window layers) and such a request is never scheduled",
            "lower --max-model-len, or add KV memory (TP, fp8 KV cache)",
        )
