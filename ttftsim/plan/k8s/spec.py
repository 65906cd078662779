"""Every decision the winner's manifests make, in one frozen value: names, image, the `vllm serve` command,
GPUs per pod and pods per replica, GPU resource and node pin, storage sized from the checkpoint, the startup
budget, the router object, what is quantized online.

Weights on disk are the checkpoint's: its native dtype (bf16 for Meta's Llama repositories), whatever the
engine quantizes to at load. Online fp8 (`--quantization fp8` on a 16-bit checkpoint) is vLLM's dynamic
per-tensor quantization when the weights load (vLLM docs, "FP8 W8A8", online dynamic quantization); int8 and
int4 have no online path the plan models, so those candidates need a pre-quantized checkpoint, said as such.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttftsim.cluster.coldstart import NodeCaches, cold_start_phases
from ttftsim.config.cluster_nodes import PodSpec
from ttftsim.config.engine import EngineArgs
from ttftsim.config.graphs import COMPILATION_KEYS, compile_and_mode
from ttftsim.config.hardware import HardwareProfile
from ttftsim.config.manifest_options import ManifestOptions
from ttftsim.config.plan import Plan
from ttftsim.config.versions import at_least
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.model.size import weight_bytes
from ttftsim.plan.evaluate import Candidate
from ttftsim.replica import resolve_ref

IMAGE = "vllm/vllm-openai:v{version}"
# vLLM's ROCm build (docs/getting_started/installation/gpu.rocm.inc.md: "vllm/vllm-openai-rocm" on Docker Hub)
ROCM_IMAGE = "vllm/vllm-openai-rocm:v{version}"
PORT = 8000
PROBE_PERIOD_S = 10
STARTUP_MARGIN = 1.5
STORAGE_MARGIN = 1.2  # the checkpoint plus tokenizer, config and the cache's own files, with room to spare
GIB = 2**30
MIN_MEMORY_GIB = 64  # tokenizer, API server, CUDA context and the loader's buffers of a small model
# Routers a Kubernetes Service can stand for; the others need an endpoint picker (InferencePool)
SERVICE_ROUTERS = ("round_robin", "session_affinity")
PREQUANTIZED = {"int8": "compressed-tensors", "int4": "awq"}  # vLLM's --quantization for such a checkpoint


@dataclass(frozen=True)
class Deployable:
    """The winner as it will be deployed. Invariant: gpus_per_pod x pods_per_replica = tensor_parallel_size x
    pipeline_parallel_size x data_parallel_size (the plan's engine sets PP for every candidate)."""

    name: str
    model_id: str
    image: str
    vllm_command: tuple[str, ...]
    replicas: int
    max_replicas: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    pods_per_replica: int
    gpus_per_pod: int
    gpu_resource: str
    node_selector: dict[str, Any]
    hardware: str
    startup_budget_s: float
    checkpoint_bytes: float
    storage_gib: int
    memory_gib: int
    router: str
    zones: int
    online_quantization: str | None  # "fp8" when the weights are quantized as they load
    prequantized: str | None  # the weight format the checkpoint must already be in
    options: ManifestOptions

    @property
    def shm_gib(self) -> int:
        return shm_gib(self.gpus_per_pod)

    @property
    def gpu_node_terms(self) -> list[dict[str, Any]]:
        """nodeSelectorTerms pinning the pods to nodes of the planned GPU (their required node affinity)."""
        return [{"matchExpressions": [self.node_selector]}]

    @property
    def routed(self) -> bool:
        """Whether the router is an InferencePool's endpoint picker rather than a Service."""
        return self.router not in SERVICE_ROUTERS

    @property
    def startup_failure_threshold(self) -> int:
        return math.ceil(self.startup_budget_s / PROBE_PERIOD_S)


def deployable(
    plan: Plan, cand: Candidate, replicas: int, replica_weight_bytes: float, model_id: str, base: Path
) -> Deployable:
    """The winner's deployment. replica_weight_bytes: the replica's weights as served (all TP shards), for
    the cold start; the checkpoint's size on disk comes from the model's native dtype."""
    hardware = load_hardware(resolve_ref(cand.hardware, base))
    model = load_model(resolve_ref(plan.model, base))
    world = cand.tensor_parallel_size * plan.engine.pipeline_parallel_size * cand.data_parallel_size
    pods = pods_per_replica(world, hardware.gpus_per_node)
    checkpoint = weight_bytes(model, model.native_dtype)
    quantized = cand.quantization not in (None, model.native_dtype)
    return Deployable(
        name=dns_name(plan.name),
        model_id=model_id,
        image=(ROCM_IMAGE if gpu_resource(hardware) == "amd.com/gpu" else IMAGE).format(
            version=plan.engine.vllm_version
        ),
        vllm_command=tuple(vllm_args(plan, cand, model_id, model.native_dtype)),
        replicas=replicas,
        max_replicas=max(replicas * 2, replicas + 2),
        tensor_parallel_size=cand.tensor_parallel_size,
        pipeline_parallel_size=plan.engine.pipeline_parallel_size,
        data_parallel_size=cand.data_parallel_size,
        pods_per_replica=pods,
        gpus_per_pod=world // pods,
        gpu_resource=gpu_resource(hardware),
        node_selector=gpu_node_selector(hardware),
        hardware=hardware.name,
        startup_budget_s=startup_budget_s(replica_weight_bytes, world, plan.engine),
        checkpoint_bytes=checkpoint,
        storage_gib=math.ceil(checkpoint * STORAGE_MARGIN / GIB),
        memory_gib=memory_gib(checkpoint / pods, shm_gib(world // pods)),
        router=cand.router,
        zones=plan.availability.zones,
        online_quantization="fp8" if quantized and cand.quantization == "fp8" else None,
        prequantized=cand.quantization if quantized and cand.quantization in PREQUANTIZED else None,
        options=plan.manifests,
    )


def vllm_args(plan: Plan, cand: Candidate, model_id: str, native_dtype: str | None = None) -> list[str]:
    """`vllm serve` command line for the candidate (only what differs from vLLM's defaults, plus TP). A
    quantization the checkpoint already has is left to vLLM, which reads it from the checkpoint's config."""
    args = ["vllm", "serve", model_id, "--tensor-parallel-size", str(cand.tensor_parallel_size)]
    if plan.engine.pipeline_parallel_size > 1:
        args += ["--pipeline-parallel-size", str(plan.engine.pipeline_parallel_size)]
    if cand.data_parallel_size > 1:
        args += ["--data-parallel-size", str(cand.data_parallel_size)]
    if cand.enable_expert_parallel:
        args.append("--enable-expert-parallel")
    if cand.max_num_seqs is not None:
        args += ["--max-num-seqs", str(cand.max_num_seqs)]
    if cand.max_num_batched_tokens is not None:
        args += ["--max-num-batched-tokens", str(cand.max_num_batched_tokens)]
    if plan.engine.max_model_len is not None:
        args += ["--max-model-len", str(plan.engine.max_model_len)]
    if plan.engine.gpu_memory_utilization is not None:
        args += ["--gpu-memory-utilization", str(plan.engine.gpu_memory_utilization)]
    args.append("--enable-prefix-caching" if cand.enable_prefix_caching else "--no-enable-prefix-caching")
    args.append("--enable-chunked-prefill" if cand.enable_chunked_prefill else "--no-enable-chunked-prefill")
    if cand.quantization in ("fp8", "int8", "int4") and cand.quantization != native_dtype:
        args += ["--quantization", "fp8" if cand.quantization == "fp8" else PREQUANTIZED[cand.quantization]]
    if cand.kv_cache_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    return args + graph_args(plan.engine)


def graph_args(engine: EngineArgs) -> list[str]:
    """The plan's compilation and CUDA-graph settings (config/graphs.py) and admission limits (engine/admission.py)
    as vLLM flags, those that are set."""
    args = ["--enforce-eager"] if engine.enforce_eager else []
    compilation: dict[str, object] = {
        key: value for key in COMPILATION_KEYS if (value := getattr(engine, key)) is not None
    }
    level = engine.optimization_level
    if level is not None and compilation and not at_least(engine.vllm_version, (0, 13)):
        compilation = {"level": level, **compilation}  # before 0.13 -O is this JSON's level: one flag, not two
    elif level is not None:
        args.append(f"-O{level}")
    if compilation:
        args += ["--compilation-config", json.dumps(compilation, separators=(",", ":"))]
    if engine.performance_mode != "balanced":
        args += ["--performance-mode", engine.performance_mode]
    for name in ("max_num_queued_reqs", "max_num_queued_tokens"):  # the API server's admission limits
        if (limit := getattr(engine, name)) is not None:
            args += ["--" + name.replace("_", "-"), str(limit)]
    return args


def shm_gib(gpus_per_pod: int) -> int:
    """The in-memory /dev/shm: NCCL's buffers between the pod's GPUs, a little for one GPU."""
    return 16 if gpus_per_pod > 1 else 2


def memory_gib(share_bytes: float, shm_gib: int) -> int:
    """Host memory per pod: its share of the checkpoint with a fifth more (the loader reads each shard
    through host memory) plus the in-memory /dev/shm, which counts against the limit; at least
    MIN_MEMORY_GIB."""
    return max(MIN_MEMORY_GIB, math.ceil(share_bytes * STORAGE_MARGIN / GIB) + shm_gib)


def pods_per_replica(world: int, gpus_per_node: int) -> int:
    """The fewest pods that hold the replica's GPUs with the same count in each (whole GPUs per pod)."""
    pods = max(1, math.ceil(world / gpus_per_node))
    while world % pods:
        pods += 1
    return pods


def startup_budget_s(weight_bytes: float, tp: int, engine: EngineArgs | None = None) -> float:
    """The predicted cold start on a bare node (no image, no caches), with margin; without the compile or the
    graph capture where the engine's settings skip them (config/graphs.py)."""
    compiled, graphs = True, True
    if engine is not None:
        levels = at_least(engine.vllm_version, (0, 13))
        compiled, _, mode = compile_and_mode(
            levels, engine.optimization_level, engine.enforce_eager, engine.cudagraph_mode
        )
        graphs = mode != "NONE"
    phases = cold_start_phases(PodSpec(), weight_bytes, tp, NodeCaches(False, False, False), compiled, graphs)
    return STARTUP_MARGIN * sum(seconds for _, seconds in phases)


def gpu_node_selector(hardware: HardwareProfile) -> dict[str, Any]:
    """The match expression that pins the pods to the GPU: the profile's first node label and its first value
    (GPU feature discovery's nvidia.com/gpu.product for NVIDIA GPUs); a profile without one, its name there."""
    key, value = next(((k, v[0]) for k, v in hardware.node_labels.items()), ("nvidia.com/gpu.product", hardware.name))
    return {"key": key, "operator": "In", "values": [value]}


def gpu_resource(hardware: HardwareProfile) -> str:
    """The device plugin's resource name: AMD's (ROCm k8s-device-plugin) when the profile's GPU label is
    AMD's, else NVIDIA's."""
    first = next(iter(hardware.node_labels), "")
    return "amd.com/gpu" if first.startswith("amd.com/") else "nvidia.com/gpu"


def dns_name(name: str) -> str:
    """A DNS-1123 label of at most 50 characters (room for the suffixes the objects add: -weights, -epp)."""
    cleaned = "".join(ch if ch.isalnum() and ch.isascii() else "-" for ch in name.lower())
    cleaned = "-".join(part for part in cleaned.split("-") if part)
    return cleaned[:50].strip("-") or "llm"
