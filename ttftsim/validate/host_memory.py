"""The pod's memory limit against the weights it loads. vLLM's loader reads each safetensors shard through
host memory on its way to the GPU, so a limit below the pod's share of the weights risks an OOM kill during
start-up; ttftsim's own manifests (plan/k8s/spec.py memory_gib) give that share x 1.2 plus /dev/shm, at least
64 GiB. Only a limit is judged: a request alone caps nothing. A warning, not an error: how much of a shard is
resident at once depends on the loader and the page cache, and is not modelled."""

from __future__ import annotations

from ttftsim.perf.memory import GB
from ttftsim.validate.api_server_rules import quantity_value
from ttftsim.validate.manifests import ServingWorkload
from ttftsim.validate.report import Report


def check_host_memory(report: Report, serving: ServingWorkload, stage_weight_bytes: float) -> None:
    """stage_weight_bytes: one pipeline stage's weights over its TP GPUs; the replica holds pipeline_parallel of
    them over group_size pods."""
    resources = serving.container.get("resources")
    limits = resources.get("limits") if isinstance(resources, dict) else None
    limit = limits.get("memory") if isinstance(limits, dict) else None
    limit_bytes = quantity_value(limit)
    share = stage_weight_bytes * serving.pipeline_parallel / max(1, serving.group_size)
    if limit_bytes is None or share <= 0 or limit_bytes >= share:
        return
    report.add(
        "warning",
        "requests-limits",
        f"{serving.kind}/{serving.name}: memory limit {limit} ({float(limit_bytes) / GB:.1f} GB) is below the pod's "
        f"share of the weights ({share / GB:.1f} GB); vLLM's loader reads each shard through host memory, so the "
        "pod may be killed for memory while it loads",
        f"set resources.limits.memory to at least {share * 1.2 / GB:.0f} GB (the weights x 1.2, as ttftsim plan's "
        "manifests do, plus /dev/shm if it is in memory)",
    )
