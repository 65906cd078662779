"""The same deployment in the two other forms people deploy vLLM with.

- vLLM production-stack Helm values (chart vllm/vllm-stack, values.yaml `servingEngineSpec.modelSpec` and
  `routerSpec`, vllm-project/production-stack helm/values.yaml): the chart renders vllmConfig into
  `vllm serve` flags itself (enablePrefixCaching -> --enable-prefix-caching, ...), the rest go in extraArgs.
  Its router has round robin, session, prefix-aware and KV-aware logic, no least-loaded one: the load-aware
  routers the plan may pick map to round robin there, and the README says so. Single-node replicas only
  (the chart's multi-node form is a Ray cluster, raySpec, not written here).
- A KServe InferenceService (serving.kserve.io/v1beta1) on the Hugging Face runtime, which runs vLLM and
  passes engine flags through (kserve docs/samples/storage/hf/hf_isvc.yaml): `storageUri: hf://MODEL`, the
  token from the same Secret. Single-node replicas on NVIDIA GPUs only (the runtime's image is a CUDA build).
"""

from __future__ import annotations

from typing import Any

from ttftsim.plan.k8s.spec import Deployable

STACK_ROUTERS = {"round_robin": "roundrobin", "session_affinity": "session", "prefix_aware": "prefixaware"}
STACK_ROUTERS["kv_aware"] = "kvaware"
SESSION_KEY = "x-user-id"  # the header production-stack's session router keys on (its tests' example)
# vllm serve flags the chart writes from vllmConfig fields (the others go through extraArgs)
CHART_FIELDS = {
    "--tensor-parallel-size": "tensorParallelSize",
    "--max-num-seqs": "maxNumSeqs",
    "--max-model-len": "maxModelLen",
    "--gpu-memory-utilization": "gpuMemoryUtilization",
}


def production_stack_values(spec: Deployable) -> dict[str, Any] | None:
    """Helm values for vllm/vllm-stack; None for a multi-node replica."""
    if spec.pods_per_replica > 1:
        return None
    config, extra = _chart_config(spec)
    repository, tag = spec.image.rsplit(":", 1)
    model: dict[str, Any] = {
        "name": spec.name,
        "repository": repository,
        "tag": tag,
        "modelURL": spec.model_id,
        "replicaCount": spec.replicas,
        "requestCPU": 8,
        "requestMemory": f"{spec.memory_gib}Gi",
        "requestGPU": spec.gpus_per_pod,
        "requestGPUType": spec.gpu_resource,
        "pvcStorage": f"{spec.storage_gib}Gi",
        "pvcAccessMode": ["ReadWriteMany"],  # one claim for every replica of the model, as in our storage.yaml
        "vllmConfig": {**config, "extraArgs": extra},
        "hf_token": {"secretName": spec.options.hf_token_secret, "secretKey": spec.options.hf_token_key},
        "nodeSelectorTerms": spec.gpu_node_terms,
        "shmSize": f"{spec.shm_gib}Gi",
    }
    if spec.options.storage_class:
        model["storageClass"] = spec.options.storage_class
    router: dict[str, Any] = {"routingLogic": STACK_ROUTERS.get(spec.router, "roundrobin")}
    if spec.router == "session_affinity":
        router["sessionKey"] = SESSION_KEY
    return {"servingEngineSpec": {"modelSpec": [model]}, "routerSpec": router}


def _chart_config(spec: Deployable) -> tuple[dict[str, Any], list[str]]:
    """(vllmConfig fields, extraArgs) from the `vllm serve` command."""
    words = list(spec.vllm_command[3:])  # after vllm serve MODEL
    config: dict[str, Any] = {}
    extra: list[str] = []
    i = 0
    while i < len(words):
        flag = words[i]
        if flag in CHART_FIELDS:
            value = words[i + 1]
            config[CHART_FIELDS[flag]] = float(value) if "." in value else int(value)
            i += 2
        elif flag.endswith("-prefix-caching"):
            config["enablePrefixCaching"] = not flag.startswith("--no-")
            i += 1
        elif flag.endswith("-chunked-prefill"):
            config["enableChunkedPrefill"] = not flag.startswith("--no-")
            i += 1
        else:
            extra.append(flag)
            i += 1
    return config, extra


def kserve_inference_service(spec: Deployable) -> dict[str, Any] | None:
    """A KServe InferenceService on the Hugging Face (vLLM) runtime; None for a multi-node replica or AMD GPUs."""
    if spec.pods_per_replica > 1 or spec.gpu_resource != "nvidia.com/gpu":
        return None
    gpus = spec.gpus_per_pod
    resources = {
        "requests": {"cpu": "8", "memory": f"{spec.memory_gib}Gi", spec.gpu_resource: gpus},
        "limits": {"memory": f"{spec.memory_gib}Gi", spec.gpu_resource: gpus},
    }
    model = {
        "modelFormat": {"name": "huggingface"},
        "args": [f"--model_name={spec.name}", *spec.vllm_command[3:]],
        "storageUri": f"hf://{spec.model_id}",
        "env": [
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": spec.options.hf_token_secret, "key": spec.options.hf_token_key}},
            }
        ],
        "resources": resources,
    }
    required = {"nodeSelectorTerms": spec.gpu_node_terms}
    predictor: dict[str, Any] = {
        "minReplicas": spec.replicas,
        "model": model,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}},
    }
    if spec.options.autoscale:
        predictor["maxReplicas"] = spec.max_replicas
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": spec.name},
        "spec": {"predictor": predictor},
    }
