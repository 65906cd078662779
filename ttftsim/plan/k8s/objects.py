"""The Kubernetes objects of the winner, by what they do: storage, serving workload, routing, autoscaling.

- Storage (weights: pvc): a ReadWriteMany claim and a Job that downloads the checkpoint into it with
  huggingface_hub's snapshot_download (skipping `original/*` and `*.pth`, the consolidated copies some
  repositories ship beside the safetensors that vLLM loads).
- Workload: a Deployment; a LeaderWorkerSet when the TP group spans nodes, its leader and workers joined
  into one Ray cluster by the script vLLM's image ships (examples/online_serving/multi-node-serving.sh), as
  the LWS project's vLLM example does (kubernetes-sigs/lws docs/examples/vllm/GPU/lws.yaml).
- Routing: a Service always (kube-proxy spreads connections at random, the closest to round robin;
  ClientIP affinity for session affinity). For load- and prefix-aware routers an InferencePool
  (inference.networking.k8s.io/v1, the form the GIE `inferencepool` chart v1.0 renders: selector,
  targetPorts, endpointPickerRef `<name>-epp` on port 9002) and an HTTPRoute from the Gateway to it.
- Autoscaling: an HPA on vLLM's waiting queue per pod (a Pods metric), with the prometheus-adapter rule that
  serves it (the chart's `rules.custom` format, as vLLM production-stack's observability/prom-adapter.yaml).
"""

from __future__ import annotations

import shlex
from typing import Any

from ttftsim.plan.k8s.pod import HF_HOME, env, labels, pod_template, weights_claim
from ttftsim.plan.k8s.spec import PORT, Deployable

EPP_PORT = 9002
POOL_GROUP = "inference.networking.k8s.io"
HPA_METRIC = "vllm_num_requests_waiting"
HPA_TARGET_WAITING = "5"
MULTI_NODE_SCRIPT = "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh"


def storage(spec: Deployable) -> list[dict[str, Any]]:
    """The weights claim and the Job that fills it (empty for weights: node_cache)."""
    if spec.options.weights != "pvc":
        return []
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": f"{spec.storage_gib}Gi"}},
    }
    if spec.options.storage_class:
        claim["storageClassName"] = spec.options.storage_class
    download = (
        "from huggingface_hub import snapshot_download; "
        f"snapshot_download({spec.model_id!r}, ignore_patterns=['original/*', '*.pth'])"
    )
    job_pod = {
        "restartPolicy": "OnFailure",
        "containers": [
            {
                "name": "download",
                "image": spec.image,
                "command": ["python3", "-c", download],
                "env": [e for e in env(spec) if e["name"] != "HF_HUB_OFFLINE"],
                "resources": {"requests": {"cpu": "2", "memory": "8Gi"}},
                "volumeMounts": [{"name": "weights", "mountPath": HF_HOME}],
            }
        ],
        "volumes": [{"name": "weights", "persistentVolumeClaim": {"claimName": weights_claim(spec)}}],
    }
    return [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": weights_claim(spec)}, "spec": claim},
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"{spec.name}-download"},
            "spec": {"backoffLimit": 6, "template": {"spec": job_pod}},
        },
    ]


def workload(spec: Deployable) -> dict[str, Any]:
    """The Deployment, or the LeaderWorkerSet of a multi-node replica."""
    metadata = {"name": spec.name, "labels": labels(spec)}
    if spec.pods_per_replica == 1:
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": metadata,
            "spec": {
                "replicas": spec.replicas,
                "selector": {"matchLabels": labels(spec)},
                "template": pod_template(spec, list(spec.vllm_command)),
            },
        }
    vllm = shlex.join(spec.vllm_command)
    leader = ["sh", "-c", f"{MULTI_NODE_SCRIPT} leader --ray_cluster_size=$(LWS_GROUP_SIZE); {vllm}"]
    worker = ["sh", "-c", f"{MULTI_NODE_SCRIPT} worker --ray_address=$(LWS_LEADER_ADDRESS)"]
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": metadata,
        "spec": {
            "replicas": spec.replicas,
            "leaderWorkerTemplate": {
                "size": spec.pods_per_replica,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": pod_template(spec, leader),
                "workerTemplate": pod_template(spec, worker, probes=False),
            },
        },
    }


def service(spec: Deployable) -> dict[str, Any]:
    """The Service in front of the pods (a LeaderWorkerSet's leaders only: they serve the API)."""
    selector = dict(labels(spec))
    if spec.pods_per_replica > 1:
        selector["leaderworkerset.sigs.k8s.io/worker-index"] = "0"
    body: dict[str, Any] = {"selector": selector, "ports": [{"name": "http", "port": PORT, "targetPort": PORT}]}
    if spec.router == "session_affinity":
        body["sessionAffinity"] = "ClientIP"
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": spec.name}, "spec": body}


def routing(spec: Deployable) -> list[dict[str, Any]]:
    """The InferencePool and the HTTPRoute to it, for a load- or prefix-aware router (else nothing)."""
    if not spec.routed:
        return []
    selector = dict(labels(spec))
    if spec.pods_per_replica > 1:
        selector["leaderworkerset.sigs.k8s.io/worker-index"] = "0"
    pool = {
        "apiVersion": f"{POOL_GROUP}/v1",
        "kind": "InferencePool",
        "metadata": {"name": spec.name},
        "spec": {
            "selector": {"matchLabels": selector},
            "targetPorts": [{"number": PORT}],
            "endpointPickerRef": {"name": f"{spec.name}-epp", "port": {"number": EPP_PORT}, "failureMode": "FailOpen"},
        },
    }
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": spec.name},
        "spec": {
            "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": spec.options.gateway}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [
                        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": spec.name}
                    ],
                    "timeouts": {"request": "300s"},
                }
            ],
        },
    }
    return [pool, route]


def autoscaler(spec: Deployable, workload_object: dict[str, Any]) -> dict[str, Any]:
    """The HPA: from the planned replicas up, on the waiting queue per pod; slow to scale down (a cold start
    is minutes)."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": spec.name},
        "spec": {
            "scaleTargetRef": {
                "apiVersion": workload_object["apiVersion"],
                "kind": workload_object["kind"],
                "name": spec.name,
            },
            "minReplicas": spec.replicas,
            "maxReplicas": spec.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": HPA_METRIC},
                        "target": {"type": "AverageValue", "averageValue": HPA_TARGET_WAITING},
                    },
                }
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": scale_down_window_s(spec)}},
        },
    }


def scale_down_window_s(spec: Deployable) -> int:
    """At least the default five minutes, and no shorter than the startup budget (a pod removed now takes
    that long to come back)."""
    return max(300, int(spec.startup_budget_s + 0.999))


def adapter_values() -> dict[str, Any]:
    """prometheus-adapter chart values: the rule that serves vLLM's waiting-queue gauge per pod as a custom
    metric (vllm:num_requests_waiting, renamed without the colon the custom metrics API does not take)."""
    return {
        "rules": {
            "default": True,  # keep the chart's own rules (CPU, memory)
            "custom": [
                {
                    "seriesQuery": 'vllm:num_requests_waiting{namespace!="",pod!=""}',
                    "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
                    "name": {"matches": "^vllm:num_requests_waiting$", "as": HPA_METRIC},
                    "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
                }
            ],
        }
    }


def manifest_objects(spec: Deployable) -> list[dict[str, Any]]:
    """What manifests.yaml holds, in apply order after storage: workload, Service, routing, HPA."""
    serving = workload(spec)
    objects = [serving, service(spec), *routing(spec)]
    if spec.options.autoscale:
        objects.append(autoscaler(spec, serving))
    return objects
