"""What the GPU-count findings of gpu_scheduling.py say about a request: a resource name one typo away from a
device plugin's (`nvidia.com/gpus`: no node advertises it, so the pod stays Pending), and the tensor-parallel size
a fix may suggest for the GPUs a pod requests, only where vLLM could start with it: the pod fits a node and the
size divides the model's attention heads (a model ttftsim cannot load here gets no suggestion)."""

from __future__ import annotations

import difflib
from typing import Any

from ttftsim.errors import InputError
from ttftsim.model.catalog import load_model
from ttftsim.validate.serving_container import GPU_RESOURCES

MAX_GPUS_PER_REPLICA = 64  # a TP the fix may suggest (a 64-GPU NVL domain at most)


def misspelt_gpu_resource(container: dict[str, Any]) -> tuple[str, str, Any] | None:
    """(the name written, the device plugin's name it is close to, its quantity) for a limit or request whose name
    is near nvidia.com/gpu or amd.com/gpu but not one (MIG slices aside); None when there is none."""
    resources = container.get("resources")
    resources = resources if isinstance(resources, dict) else {}
    for part in ("limits", "requests"):
        quantities = resources.get(part)
        for name, quantity in (quantities if isinstance(quantities, dict) else {}).items():
            if name in GPU_RESOURCES or str(name).startswith("nvidia.com/mig-"):
                continue
            close = difflib.get_close_matches(str(name), GPU_RESOURCES, n=1, cutoff=0.85)
            if close:
                return str(name), close[0], quantity
    return None


def fitting_tp(gpus: int, other: int, per_node: int | None, model: str) -> int | None:
    """The --tensor-parallel-size that uses all `gpus` of one pod with `other` (pipeline x data parallel) GPUs per
    tensor group, where vLLM could start with it: it divides them, the pod fits a node of `per_node` GPUs (when
    known), and it divides the model's attention heads; None otherwise."""
    if gpus % other or gpus > MAX_GPUS_PER_REPLICA or (per_node is not None and gpus > per_node):
        return None
    heads = _attention_heads(model)
    tp = gpus // other
    return tp if heads is not None and heads % tp == 0 else None


def _attention_heads(model: str) -> int | None:
    """The model's attention heads where ttftsim can load it by name here (a preset or a Hugging Face id); None for
    a path (read relative to the deployment file, later) or a model it cannot load."""
    if model.startswith(("/", ".", "~")) or model.endswith(".json"):
        return None
    try:
        return load_model(model).num_attention_heads
    except InputError:
        return None
