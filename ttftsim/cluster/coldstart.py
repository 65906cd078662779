"""A pod's cold start as a pipeline of phases (serving-semantics.md part 4), each with its duration.

image pull (image size / registry throughput; 0 when the node has the image) -> container start and
imports -> weight load (weight bytes / TP, each rank streaming its shard at the source's bandwidth; a
node whose page cache already holds the weights serves them at page-cache speed) -> distributed init
(TP > 1) -> torch.compile (cold, or from the node's warm cache; skipped without compilation: --enforce-eager,
-O0) -> CUDA-graph capture (skipped with cudagraph_mode NONE: config/graphs.py) -> warm-up -> Ready. Node
provisioning, when the pod waited for a new node, comes before.
"""

from __future__ import annotations

from dataclasses import dataclass

from ttftsim.config.cluster_nodes import WEIGHT_SOURCE_BW, PodSpec


@dataclass(frozen=True)
class NodeCaches:
    image: bool
    weights: bool
    compile: bool


def cold_start_phases(
    pod: PodSpec, weight_bytes: float, tp: int, caches: NodeCaches, compiled: bool = True, graphs: bool = True
) -> list[tuple[str, float]]:
    """(phase, seconds) in order, from the pod's binding to a node until it is Ready."""
    source_bw = (
        WEIGHT_SOURCE_BW["page_cache"]
        if caches.weights
        else (pod.weights_bytes_per_s or WEIGHT_SOURCE_BW[pod.weights_source])
    )
    phases = [
        ("image_pull", 0.0 if caches.image else pod.image_bytes / pod.registry_bytes_per_s),
        ("container_start", pod.container_start_s),
        ("weight_load", weight_bytes / max(tp, 1) / source_bw),
        ("distributed_init", pod.distributed_init_s if tp > 1 else 0.0),
        ("compile", (pod.compile_cached_s if caches.compile else pod.compile_s) if compiled else 0.0),
        ("graph_capture", pod.graph_capture_s if graphs else 0.0),
        ("warmup", pod.warmup_s),
    ]
    return phases
