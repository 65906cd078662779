"""The vLLM pod: container, token, weights, /dev/shm, probes, placement.

- HF_TOKEN comes from a Secret (name and key in the plan's `manifests`), never inline.
- Weights: a ReadWriteMany claim mounted as the Hugging Face cache (HF_HOME), filled once by the download
  Job, read offline (HF_HUB_OFFLINE=1) by every pod; or a hostPath cache on each node, which the node's first
  pod fills, with an ephemeral-storage request of the checkpoint's size so the scheduler only picks nodes
  with that much local disk (the LeaderWorkerSet vLLM example sizes ephemeral storage the same way; the
  kubelet does not count hostPath bytes against it).
- /dev/shm: an in-memory emptyDir (NCCL's buffers; the container runtime's default is 64 MB).
- Placement: required node affinity on the GPU label; preferred anti-affinity on the hostname; a zone
  spread, hard when the plan spreads over zones, soft otherwise.
- Probes on vLLM's /health: a startup probe allowing the predicted bare-node cold start with margin, then
  readiness and liveness.
"""

from __future__ import annotations

from typing import Any

from ttftsim.plan.k8s.spec import PORT, PROBE_PERIOD_S, Deployable

HF_HOME = "/models/hf"
NODE_CACHE_PATH = "/var/lib/hf-cache"
CPU_REQUEST = "8"
ANNOTATION_PREFIX = "ttftsim"


def labels(spec: Deployable) -> dict[str, str]:
    return {"app": spec.name}


def quantization_notes(spec: Deployable) -> dict[str, str]:
    """What a reader of the cluster should know about the pods: online quantization, a checkpoint that must be
    pre-quantized."""
    notes = {}
    if spec.online_quantization:
        quantization = spec.online_quantization
        notes[f"{ANNOTATION_PREFIX}/quantization"] = (
            f"online {quantization}: --quantization {quantization} on the 16-bit checkpoint {spec.model_id}, "
            "weights quantized while they load"
        )
    if spec.prequantized:
        notes[f"{ANNOTATION_PREFIX}/quantization"] = (
            f"the plan assumed {spec.prequantized} weights: serve a pre-quantized checkpoint of {spec.model_id}"
        )
    return notes


def pod_template(spec: Deployable, command: list[str], probes: bool = True) -> dict[str, Any]:
    """The pod template of one replica's pod (a LeaderWorkerSet worker: probes=False, its own command)."""
    scrape = {"prometheus.io/scrape": "true", "prometheus.io/port": str(PORT), "prometheus.io/path": "/metrics"}
    metadata: dict[str, Any] = {
        "labels": labels(spec),
        "annotations": {**(scrape if probes else {}), **quantization_notes(spec)},  # workers serve no API
    }
    pod: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": spec.gpu_node_terms}
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": labels(spec)},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule" if spec.zones > 1 else "ScheduleAnyway",
                "labelSelector": {"matchLabels": labels(spec)},
            }
        ],
        "tolerations": [{"key": spec.gpu_resource, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container(spec, command, probes)],
        "volumes": volumes(spec),
    }
    return {"metadata": metadata, "spec": pod}


def container(spec: Deployable, command: list[str], probes: bool) -> dict[str, Any]:
    memory = f"{spec.memory_gib}Gi"
    requests: dict[str, Any] = {spec.gpu_resource: spec.gpus_per_pod, "cpu": CPU_REQUEST, "memory": memory}
    limits: dict[str, Any] = {spec.gpu_resource: spec.gpus_per_pod, "memory": memory}
    if spec.options.weights == "node_cache":
        requests["ephemeral-storage"] = f"{spec.storage_gib}Gi"
    out: dict[str, Any] = {
        "name": "vllm",
        "image": spec.image,
        "command": command,
        "env": env(spec),
        "ports": [{"containerPort": PORT, "name": "http"}],
        "resources": {"requests": requests, "limits": limits},
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "weights", "mountPath": HF_HOME},
        ],
    }
    if probes:
        health = {"path": "/health", "port": PORT}
        out["startupProbe"] = {
            "httpGet": health,
            "periodSeconds": PROBE_PERIOD_S,
            "failureThreshold": spec.startup_failure_threshold,
        }
        out["readinessProbe"] = {"httpGet": health, "periodSeconds": 5}
        out["livenessProbe"] = {"httpGet": health, "periodSeconds": 10, "failureThreshold": 3}
    return out


def env(spec: Deployable) -> list[dict[str, Any]]:
    options = spec.options
    out: list[dict[str, Any]] = [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": options.hf_token_secret, "key": options.hf_token_key}},
        },
        {"name": "HF_HOME", "value": HF_HOME},
    ]
    if options.weights == "pvc":  # the download Job filled the claim: no pod goes to the Hub again
        out.append({"name": "HF_HUB_OFFLINE", "value": "1"})
    return out


def volumes(spec: Deployable) -> list[dict[str, Any]]:
    shm = f"{spec.shm_gib}Gi"
    weights: dict[str, Any] = (
        {"name": "weights", "persistentVolumeClaim": {"claimName": weights_claim(spec)}}
        if spec.options.weights == "pvc"
        else {"name": "weights", "hostPath": {"path": NODE_CACHE_PATH, "type": "DirectoryOrCreate"}}
    )
    return [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": shm}}, weights]


def weights_claim(spec: Deployable) -> str:
    return f"{spec.name}-weights"
