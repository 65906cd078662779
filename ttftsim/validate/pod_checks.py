"""The vLLM workload's pod spec beyond GPU scheduling: the GPU count against the engine's parallelism and the GPU type
label (unknown, missing, time-sliced), anti-affinity, memory and CPU requests, the CPU limit against vLLM's
processes (cpu_limit.py), /dev/shm for a multi-GPU replica (shared_memory.py),
probes against the predicted cold start (weights not yet on the node, read from where the manifest mounts them:
weights_source.py) and vLLM's port, and the HPA that scales the workload; with a warning for each vLLM flag the
prediction parses but leaves out. Another workload's HPA, and what a probe's path returns, are not checked."""

from __future__ import annotations

import math
from typing import Any

from ttftsim.cluster.coldstart import NodeCaches, cold_start_phases
from ttftsim.config.cluster_nodes import PodSpec
from ttftsim.config.resolved_engine import ResolvedEngine
from ttftsim.hardware.catalog import node_label_keys
from ttftsim.validate.cpu_limit import check_cpu_limit
from ttftsim.validate.gpu_scheduling import SHARED_SUFFIX, check_gpu_count, gpu_label, label_hardware, unknown_gpu_keys
from ttftsim.validate.hpa_metrics import check_metric_names, check_metric_targets
from ttftsim.validate.manifests import ServingWorkload
from ttftsim.validate.report import Report
from ttftsim.validate.shared_memory import check_shared_memory
from ttftsim.validate.target import Target
from ttftsim.validate.weights_source import weights_source

WORDS = {
    "object_store": "the Hub (no volume holds them)",
    "network_volume": "a network volume",
    "local_nvme": "the node's disk",
    "page_cache": "the page cache",
    "tmpfs": "memory",
}


def check_manifests(report: Report, serving: ServingWorkload, target: Target) -> None:
    where = f"{serving.kind}/{serving.name}"
    tp = target.engine.tensor_parallel_size * serving.pipeline_parallel * target.engine.data_parallel_size
    check_gpu_count(report, serving, target)
    _check_gpu_label(report, serving, target, where)
    anti = (serving.pod_spec.get("affinity") or {}).get("podAntiAffinity") or serving.pod_spec.get(
        "topologySpreadConstraints"
    )
    if target.replicas > 1 and not anti:
        report.add(
            "warning",
            "anti-affinity",
            f"{where}: {target.replicas} replicas without podAntiAffinity or topology spread; one node failure can "
            "take several replicas at once",
            "add podAntiAffinity (preferred, topologyKey kubernetes.io/hostname) or a topologySpreadConstraint",
        )
    _check_requests(report, serving, where)
    check_cpu_limit(report, serving, target.engine, where)
    check_shared_memory(report, serving, tp, where)


def _check_gpu_label(report: Report, serving: ServingWorkload, target: Target, where: str) -> None:
    """The GPU type label the pods are pinned to: on a key ttftsim cannot read, none, time-sliced, or unknown. Each
    is an error without hardware in the deployment file (nothing names the GPU to predict on)."""
    label = gpu_label(serving)
    unknown = unknown_gpu_keys(serving) if label is None and serving.hardware_label() is None else []
    if unknown:  # pinned on a label of the cluster's own: the GPU type is there, ttftsim cannot read it
        _unreadable_gpu_keys(report, target, where, unknown)
    elif label is None:
        _no_gpu_label(report, serving, target, where)
    elif label.upper().endswith(SHARED_SUFFIX) and label_hardware(label):
        report.add(
            "warning",
            "gpu-affinity",
            f"{where}: GPU label value {label!r} is a time-sliced GPU (NVIDIA GPU Feature Discovery renames shared "
            "GPUs' product label with -SHARED): other pods share its memory and compute, which the prediction "
            f"(a whole {label_hardware(label)}) does not include",
            "give the vLLM pods whole GPUs (a node pool without time-slicing)",
        )
    elif label_hardware(label) is None:  # no GPU to predict on: a gate that passed here would have checked nothing
        report.add(
            "warning" if target.hardware else "error",
            "gpu-affinity",
            f"{where}: unknown GPU label value {label!r}"
            + ("" if target.hardware else ": ttftsim cannot tell the GPU, so memory and the SLO go unchecked"),
            "" if target.hardware else "set hardware in the deployment file (e.g. hardware: H100-SXM5-80GB)",
        )


def _unreadable_gpu_keys(report: Report, target: Target, where: str, unknown: list[str]) -> None:
    """The pods select on GPU-like label keys no hardware profile names GPUs by."""
    known = ", ".join(node_label_keys()[:3])
    report.add(
        "info" if target.hardware else "error",
        "gpu-affinity",
        f"{where}: the pods select on {', '.join(unknown)}, not a GPU type label ttftsim reads ({known}, ...)"
        + ("" if target.hardware else ": ttftsim cannot tell which GPU they get"),
        "set hardware in the deployment file" if not target.hardware else "",
    )


def _no_gpu_label(report: Report, serving: ServingWorkload, target: Target, where: str) -> None:
    """No GPU type label constrains every pod: any GPU of the cluster may run them."""
    report.add(
        "warning" if target.hardware else "error",
        "gpu-affinity",
        (
            f"{where}: a term of the required node affinity names no GPU type label (terms are alternatives: it "
            "admits any GPU)"
            if serving.hardware_label() is not None  # some term names one
            else f"{where}: no nodeSelector or required node affinity on a GPU type label"
        )
        + "; in a cluster with several GPU types the pods land on any of them"
        + ("" if target.hardware else ", and ttftsim cannot tell which"),
        "add a required nodeAffinity on nvidia.com/gpu.product"
        + ("" if target.hardware else " (or set hardware in the deployment file)"),
    )


def _check_requests(report: Report, serving: ServingWorkload, where: str) -> None:
    """Memory and CPU asked of the scheduler: without them the pod may be evicted or starved."""
    resources = serving.container.get("resources") or {}
    if "memory" not in (resources.get("limits") or {}) and "memory" not in (resources.get("requests") or {}):
        report.add(
            "warning",
            "requests-limits",
            f"{where}: no memory request or limit; weight loading needs host memory and the pod may be evicted",
            "set resources.requests.memory (and a limit) above the model's weight size",
        )
    # Kubernetes defaults a missing request to the limit (pkg/apis/core/v1/defaults.go SetDefaults_Pod)
    if "cpu" not in (resources.get("requests") or {}) and "cpu" not in (resources.get("limits") or {}):
        report.add(
            "warning",
            "requests-limits",
            f"{where}: no CPU request; tokenisation and scheduling starve",
            "request 4-8 CPUs",
        )


def not_modelled(serving: ServingWorkload) -> list[str]:
    """What the manifests' vllm command sets that the prediction leaves out, one warning each."""
    where = f"{serving.kind}/{serving.name}"
    warnings = []
    for flag in serving.not_modelled:
        warnings.append(f"vLLM flag {flag} ({where}) is parsed but not modelled: its effect is not predicted")
    return warnings


def check_probes_and_hpa(report: Report, serving: ServingWorkload, weights: float, engine: ResolvedEngine) -> None:
    where = f"{serving.kind}/{serving.name}"
    graphs = engine.cudagraph_mode != "NONE"  # an eager engine compiles and captures nothing (config/graphs.py)
    source = weights_source(serving)  # where the manifest has the weights read from (the Hub: no volume for them)
    pod = PodSpec(weights_source=source)
    phases = cold_start_phases(pod, weights, engine.tp, NodeCaches(True, False, False), engine.compiled, graphs)
    cold = sum(s for _, s in phases)
    container = serving.container
    startup, liveness = container.get("startupProbe"), container.get("livenessProbe")
    if startup:
        budget = _probe_budget(startup)
        if budget < cold:
            report.add(
                "error",
                "probes",
                f"{where}: the startup probe gives up after {budget:.0f} s, but a cold start takes about {cold:.0f} s "
                f"(weights from {WORDS[source]}, compile, CUDA graphs): the pod restarts forever",
                f"set startupProbe failureThreshold x periodSeconds >= {math.ceil(cold * 1.5)} s",
            )
    elif liveness and _probe_budget(liveness) < cold:
        report.add(
            "error",
            "probes",
            f"{where}: no startup probe, and the liveness probe kills the container after "
            f"{_probe_budget(liveness):.0f} s, before a cold start of about {cold:.0f} s ends (CrashLoopBackOff)",
            f"add a startupProbe allowing {math.ceil(cold * 1.5)} s",
        )
    if not container.get("readinessProbe"):
        report.add(
            "warning",
            "probes",
            f"{where}: no readiness probe; requests reach the pod while it is still loading",
            f"add a readinessProbe on /health (port {serving.port or _server_port(container)})",
        )
    _check_probe_ports(report, serving)
    _check_hpa(report, serving, cold)


PROBE_FAILS = {
    "readinessProbe": "the pod never becomes Ready (no traffic, a rollout that never ends)",
    "livenessProbe": "the kubelet restarts the container once the probe's failures run out, over and over",
    "startupProbe": "the kubelet restarts the container once the probe's failures run out, over and over",
}


def _check_probe_ports(report: Report, serving: ServingWorkload) -> None:
    """A probe on another port than the one vLLM listens on (--port, default 8000) fails every time. A named port
    is the container's port of that name; a name the container does not declare fails too (the kubelet cannot
    resolve it: pkg/kubelet/prober, ResolveContainerPort)."""
    container = serving.container
    named = {p.get("name"): p.get("containerPort") for p in container.get("ports") or [] if isinstance(p, dict)}
    for kind, consequence in PROBE_FAILS.items():
        probe = container.get(kind)
        handler = (probe.get("httpGet") or probe.get("tcpSocket")) if isinstance(probe, dict) else None
        port = handler.get("port") if isinstance(handler, dict) else None
        if isinstance(port, str) and not port.isdigit() and port not in named:
            report.add(
                "error",
                "probes",
                f"{serving.kind}/{serving.name}: the {kind} checks the port named {port!r}, which the container "
                f"does not declare: it fails every time; {consequence}",
                f"name the port in the container's ports, or probe port {serving.port or _server_port(container)}",
            )
            continue
        if serving.port is None:
            continue
        port = named.get(port) if isinstance(port, str) and not port.isdigit() else port
        if port is not None and str(port).isdigit() and int(port) != serving.port:
            report.add(
                "error",
                "probes",
                f"{serving.kind}/{serving.name}: the {kind} checks port {port}, but vLLM listens on {serving.port}: "
                f"it fails every time; {consequence}",
                f"probe port {serving.port} (or serve on --port {port})",
            )


def _check_hpa(report: Report, serving: ServingWorkload, cold: float) -> None:
    """The HPA that scales the workload: its bounds, metrics and scale-down window (another workload's HPA is
    not checked; one naming a workload the files do not hold is an error)."""
    where = f"{serving.kind}/{serving.name}"
    hpa = serving.hpa
    if hpa is None:
        return
    spec = hpa.get("spec") or {}
    ref = spec.get("scaleTargetRef") or {}
    if not serving.is_scaled_by(hpa):
        # an HPA of another workload in the files (a router's) is not this one's; one naming none of them is a mistake
        if (ref.get("kind"), ref.get("name")) not in serving.workloads:
            report.add(
                "error",
                "hpa",
                f"HPA {hpa.get('metadata', {}).get('name')} scales {ref.get('kind')}/{ref.get('name')}, not {where}",
                f"set scaleTargetRef to kind {serving.kind}, name {serving.name}",
            )
        return
    low, high = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if isinstance(low, int) and isinstance(high, int) and low > high:
        report.add(
            "error",
            "hpa",
            f"HPA {hpa.get('metadata', {}).get('name')}: minReplicas {low} is above maxReplicas {high}; the API server "
            "refuses it",
            "set minReplicas <= maxReplicas",
        )
    check_metric_names(report, hpa)
    check_metric_targets(report, hpa)
    resource_metrics = [m for m in spec.get("metrics") or [] if m.get("type") == "Resource"]
    if resource_metrics or not spec.get("metrics"):
        report.add(
            "warning",
            "hpa",
            "HPA scales on CPU or memory (the default is CPU 80 %): an LLM server's load shows in its queue and "
            "KV cache, not in CPU",
            "scale on vllm:num_requests_waiting (Pods metric) or TTFT P99 through the Prometheus adapter",
        )
    behavior = (spec.get("behavior") or {}).get("scaleDown") or {}
    window = behavior.get("stabilizationWindowSeconds", 300)
    if window < cold:
        report.add(
            "warning",
            "hpa",
            f"scale-down stabilization {window} s is shorter than a cold start (~{cold:.0f} s): the HPA can remove "
            "replicas it will need again before a new one could be ready",
            f"keep stabilizationWindowSeconds >= {math.ceil(cold)}",
        )


def _server_port(container: dict[str, Any]) -> int:
    """The port the server listens on: the container's first declared port (KServe's runtimes: 8080), else vLLM's
    default 8000."""
    for port in container.get("ports") or []:
        if isinstance(port, dict) and isinstance(port.get("containerPort"), int):
            return int(port["containerPort"])
    return 8000


def _probe_budget(probe: dict[str, Any]) -> float:
    return float(probe.get("initialDelaySeconds", 0)) + float(probe.get("periodSeconds", 10)) * float(
        probe.get("failureThreshold", 3)
    )
