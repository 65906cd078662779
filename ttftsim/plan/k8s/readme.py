"""README.md of the deployable output: what was planned, what the cluster needs first, what to apply in which
order, and what each file is."""

from __future__ import annotations

from ttftsim.plan.k8s.alternatives import STACK_ROUTERS
from ttftsim.plan.k8s.objects import EPP_PORT, HPA_METRIC
from ttftsim.plan.k8s.spec import Deployable

GIE_CHART = "oci://registry.k8s.io/gateway-api-inference-extension/charts/inferencepool"
GIE_VERSION = "v1.0.0"


def readme(spec: Deployable, files: list[str]) -> str:
    """The README text; files: the names written beside it."""
    kind = "LeaderWorkerSet" if spec.pods_per_replica > 1 else "Deployment"
    lines = [
        f"# Deploying {spec.name}",
        "",
        f"Planned: {spec.replicas} x {spec.hardware} TP{spec.tensor_parallel_size}"
        + (f" PP{spec.pipeline_parallel_size}" if spec.pipeline_parallel_size > 1 else "")
        + (f" DP{spec.data_parallel_size}" if spec.data_parallel_size > 1 else "")
        + " "
        f"({spec.pods_per_replica} pod(s) of {spec.gpus_per_pod} GPU(s) per replica), router {spec.router}, "
        f"serving `{spec.model_id}` with vLLM (`{spec.image}`).",
        f"Checkpoint on disk: {spec.checkpoint_bytes / 1e9:.1f} GB; weights storage {spec.storage_gib} GiB.",
        *_quantization(spec),
        "",
        "## Before you start",
        "",
        f"- GPU nodes labelled `{spec.node_selector['key']}={spec.node_selector['values'][0]}` with the device "
        f"plugin that offers `{spec.gpu_resource}`.",
        *_prerequisites(spec, kind),
        "",
        "## Apply, in this order",
        "",
        *_steps(spec, kind),
        "",
        "## The files",
        "",
        *[f"- `{name}`: {FILE_NOTES[name]}{_caveat(spec, name)}" for name in files if name in FILE_NOTES],
        "",
    ]
    return "\n".join(lines)


FILE_NOTES = {
    "manifests.yaml": "the serving workload, its Service, the InferencePool and HTTPRoute when routed, the HPA",
    "storage.yaml": "the weights claim (ReadWriteMany) and the Job that downloads the checkpoint into it",
    "prometheus-adapter-values.yaml": "prometheus-adapter chart values: the rule serving the HPA's metric",
    "production-stack-values.yaml": "alternative: the same deployment as vLLM production-stack Helm values",
    "kserve-inferenceservice.yaml": "alternative: the same deployment as a KServe InferenceService",
    "vllm-args.txt": "the `vllm serve` command line alone",
}


def _caveat(spec: Deployable, name: str) -> str:
    """What an alternative does differently from the plan."""
    if name == "production-stack-values.yaml" and spec.router not in STACK_ROUTERS:
        return f" (its router has no {spec.router} policy: routingLogic roundrobin, the nearest it offers)"
    return ""


def _quantization(spec: Deployable) -> list[str]:
    if spec.online_quantization:
        return [
            f"Weights are quantized online: `--quantization {spec.online_quantization}` on the 16-bit "
            "checkpoint (vLLM's dynamic quantization while the weights load; the pods carry the annotation "
            "`ttftsim/quantization`). Accuracy is that of online quantization, not of a calibrated checkpoint."
        ]
    if spec.prequantized:
        return [
            f"The plan assumed {spec.prequantized} weights, which vLLM cannot make at load time: replace "
            f"`{spec.model_id}` with a pre-quantized checkpoint of the same model (annotation `ttftsim/quantization`)."
        ]
    return []


def _prerequisites(spec: Deployable, kind: str) -> list[str]:
    lines = []
    if kind == "LeaderWorkerSet":
        lines.append("- The LeaderWorkerSet controller (kubernetes-sigs/lws; the API leaderworkerset.x-k8s.io/v1).")
    if spec.options.weights == "pvc":
        lines.append(
            "- A storage class offering ReadWriteMany (NFS, Filestore, EFS, CephFS...)"
            + (f": `{spec.options.storage_class}`." if spec.options.storage_class else ", the cluster's default.")
        )
    else:
        lines.append(
            f"- Local disk on each GPU node for a hostPath cache (`ephemeral-storage: {spec.storage_gib}Gi` is "
            "requested so the scheduler picks nodes with room; Pod Security `baseline` forbids hostPath)."
        )
    if spec.routed:
        lines.append(
            f"- Gateway API and Gateway API Inference Extension CRDs (InferencePool v1), and a Gateway "
            f"`{spec.options.gateway}` from an implementation that routes to InferencePools: the {spec.router} "
            "router becomes the pool's endpoint picker, which scores queue depth, KV-cache use and prefix hits."
        )
    if spec.options.autoscale:
        lines.append(
            "- Prometheus scraping the pods' `/metrics` (they carry `prometheus.io/*` annotations; with the "
            "Prometheus Operator, add a PodMonitor on port 8000) and prometheus-adapter serving "
            f"`{HPA_METRIC}` (step 3)."
        )
    return lines


def _steps(spec: Deployable, kind: str) -> list[str]:
    options = spec.options
    steps = [
        f"kubectl create secret generic {options.hf_token_secret} --from-literal={options.hf_token_key}=$HF_TOKEN",
    ]
    if options.weights == "pvc":
        steps.append(
            "kubectl apply -f storage.yaml && "
            f"kubectl wait --for=condition=complete job/{spec.name}-download --timeout=3h"
        )
    if options.autoscale:
        steps.append(
            "helm install prometheus-adapter prometheus-community/prometheus-adapter "
            "-f prometheus-adapter-values.yaml --set prometheus.url=http://PROMETHEUS.NAMESPACE.svc"
        )
    if spec.routed:
        steps.append(
            f"helm install {spec.name} {GIE_CHART} --version {GIE_VERSION} "
            f"--set inferencePool.modelServers.matchLabels.app={spec.name}  "
            f"# the endpoint picker {spec.name}-epp (port {EPP_PORT}) and the same InferencePool as manifests.yaml"
        )
    steps.append("kubectl apply -f manifests.yaml")
    rollout = (
        f"kubectl rollout status deployment/{spec.name}" if kind == "Deployment" else f"kubectl get lws {spec.name}"
    )
    steps.append(f"{rollout}  # the startup probe allows {spec.startup_budget_s:.0f} s for a cold start")
    numbered = [f"{index}. `{step}`" for index, step in enumerate(steps, 1)]
    numbered.append("")  # a paragraph of its own: right after the list, Markdown reads it as the last item's
    if spec.routed:
        numbered.append(
            f"Send traffic to the Gateway `{options.gateway}`; the Service `{spec.name}` bypasses the picker."
        )
    else:
        numbered.append(f"Send traffic to the Service `{spec.name}` on port 8000.")
    return numbered
