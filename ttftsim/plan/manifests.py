"""What a user applies for the winning plan: the `vllm serve` arguments and Kubernetes manifests.

A Deployment (or a LeaderWorkerSet when the TP group spans nodes) with the GPU request, a required node
affinity on the GPU's node label (the hardware profile's first: the product label NVIDIA's GPU feature
discovery sets), a startup probe that allows
the predicted cold start on a bare node with margin, readiness and liveness probes on vLLM's /health, a
Service, and an HPA on the waiting queue (vLLM's gauge through the Prometheus adapter).
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from ttftsim.cluster.coldstart import NodeCaches, cold_start_phases
from ttftsim.config.cluster import PodSpec
from ttftsim.config.hardware import HardwareProfile
from ttftsim.config.plan import Plan
from ttftsim.hardware.catalog import load_hardware
from ttftsim.plan.evaluate import Candidate

IMAGE = "vllm/vllm-openai:v{version}"
PROBE_PERIOD_S = 10
STARTUP_MARGIN = 1.5


def vllm_args(plan: Plan, cand: Candidate, model_id: str) -> list[str]:
    """`vllm serve` command line for the candidate (only what differs from vLLM's defaults, plus TP)."""
    args = ["vllm", "serve", model_id, "--tensor-parallel-size", str(cand.tensor_parallel_size)]
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
    if cand.quantization in ("fp8", "int8", "int4"):
        args += ["--quantization", {"fp8": "fp8", "int8": "compressed-tensors", "int4": "awq"}[cand.quantization]]
    if cand.kv_cache_dtype != "auto":
        args += ["--kv-cache-dtype", "fp8" if cand.kv_cache_dtype == "fp8" else "auto"]
    return args


def startup_budget_s(weight_bytes: float, tp: int) -> float:
    """The predicted cold start on a bare node (no image, no caches), with margin."""
    phases = cold_start_phases(PodSpec(), weight_bytes, tp, NodeCaches(False, False, False))
    return STARTUP_MARGIN * sum(seconds for _, seconds in phases)


def manifests(plan: Plan, cand: Candidate, replicas: int, weight_bytes: float, model_id: str) -> list[dict[str, Any]]:
    name = _dns(plan.name)
    hardware = load_hardware(cand.hardware)
    nodes_per_replica = max(1, math.ceil(cand.tensor_parallel_size / hardware.gpus_per_node))
    gpus_per_pod = cand.tensor_parallel_size // nodes_per_replica
    budget = startup_budget_s(weight_bytes, cand.tensor_parallel_size)
    container = {
        "name": "vllm",
        "image": IMAGE.format(version=plan.engine.vllm_version),
        "command": vllm_args(plan, cand, model_id),
        "ports": [{"containerPort": 8000, "name": "http"}],
        "resources": {
            "requests": {"nvidia.com/gpu": gpus_per_pod, "cpu": "8", "memory": "64Gi"},
            "limits": {"nvidia.com/gpu": gpus_per_pod, "memory": "64Gi"},
        },
        "startupProbe": {
            "httpGet": {"path": "/health", "port": 8000},
            "periodSeconds": PROBE_PERIOD_S,
            "failureThreshold": math.ceil(budget / PROBE_PERIOD_S),
        },
        "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 10, "failureThreshold": 3},
    }
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [gpu_node_selector(hardware)]}]
            }
        }
    }
    pod_spec: dict[str, Any] = {
        "affinity": affinity,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
    }
    if cand.tensor_parallel_size > 1:  # NCCL needs more than the container's 64 MB /dev/shm
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        pod_spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
    template = {"metadata": {"labels": {"app": name}}, "spec": pod_spec}
    if nodes_per_replica > 1:
        workload: dict[str, Any] = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "leaderWorkerTemplate": {
                    "size": nodes_per_replica,
                    "leaderTemplate": template,
                    "workerTemplate": template,
                },
            },
        }
    else:
        workload = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template},
        }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"port": 8000, "targetPort": 8000, "name": "http"}]},
    }
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": workload["apiVersion"], "kind": workload["kind"], "name": name},
            "minReplicas": replicas,
            "maxReplicas": max(replicas * 2, replicas + 2),
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "vllm:num_requests_waiting"},
                        "target": {"type": "AverageValue", "averageValue": "5"},
                    },
                }
            ],
        },
    }
    return [workload, service, hpa]


def gpu_node_selector(hardware: HardwareProfile) -> dict[str, Any]:
    """The match expression that pins the pods to the GPU: the profile's first node label and its first value
    (GPU feature discovery's nvidia.com/gpu.product for NVIDIA GPUs); a profile without one, its name there."""
    key, value = next(((k, v[0]) for k, v in hardware.node_labels.items()), ("nvidia.com/gpu.product", hardware.name))
    return {"key": key, "operator": "In", "values": [value]}


def dump(documents: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False)


def _dns(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")
    return cleaned[:50] or "llm"
