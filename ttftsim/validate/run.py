"""`ttftsim validate`: check a deployment against what vLLM and Kubernetes will do with it, then predict its
TTFT under the declared traffic. Each finding has a severity, what is wrong and why, and the fix.
Exit 0 when no finding is an error, 1 otherwise, 2 when the input cannot be read."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from ttftsim.cluster.coldstart import NodeCaches, cold_start_phases
from ttftsim.cluster.run import fixed_cluster
from ttftsim.config.base import COMMAND_LINE
from ttftsim.config.cluster import PodSpec
from ttftsim.config.deploy import Deploy
from ttftsim.config.engine import EngineArgs, ResolvedEngine
from ttftsim.config.loading import load_file
from ttftsim.config.scenario import Scenario
from ttftsim.config.versions import version_warnings
from ttftsim.config.workload import ConversationWorkload, SyntheticWorkload
from ttftsim.engine.step_plan import rejection
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import hardware_for_label, load_hardware, node_label_keys
from ttftsim.inputs.files import counted
from ttftsim.inputs.limits import current_limits
from ttftsim.metrics.slo import SloCheck, judge, slo_figures
from ttftsim.model.catalog import UNMODELLED_FORMAT, load_model
from ttftsim.model.hf_ids import name_key, parse_model_id
from ttftsim.model.not_modelled import model_warnings
from ttftsim.perf.memory import DoesNotFitError
from ttftsim.replica import build_replica, resolve_ref, window_kept
from ttftsim.simulate import simulate
from ttftsim.validate.formats import render_workloads
from ttftsim.validate.k8s_schema import SchemaFinding, UnsupportedDeploymentError, check_objects, unsupported_deployment
from ttftsim.validate.kserve import MODEL_SOURCE
from ttftsim.validate.manifests import (
    GPU_RESOURCES,
    NoServingWorkloadError,
    ServingWorkload,
    find_serving,
    read_documents,
)
from ttftsim.validate.report import Finding, Prediction, Report
from ttftsim.workload.budget import check_workload
from ttftsim.workload.request import Request
from ttftsim.workload.sources import WorkloadContext, open_loop_requests

# model errors about a name the manifests' vllm command gave: named there, with the deploy file's override
UNKNOWN_MODEL_ERRORS = ("unknown model", UNMODELLED_FORMAT)

MAX_EXTRA_REPLICAS = 8
SHARED_SUFFIX = "-SHARED"  # k8s-device-plugin sharing.timeSlicing.renameByDefault

# label namespaces of the vendors' feature discovery: their GPU type labels are the profiles' (node_label_keys); the
# rest (nvidia.com/gpu.present, .count, .family, .memory) do not pin a GPU type
VENDOR_LABEL_PREFIXES = ("nvidia.com/", "amd.com/", "beta.amd.com/", "feature.node.kubernetes.io/")
MIG = "nvidia.com/mig-"  # MIG slices' resources (nvidia.com/mig-3g.40gb, ...)
MAX_GPUS_PER_REPLICA = 64  # a TP the fix may suggest (a 64-GPU NVL domain at most)


@dataclass
class Target:
    """What will run: model, hardware, engine arguments, replicas, and the manifests' view if any."""

    model: str
    hardware: str | None
    engine: EngineArgs
    replicas: int
    serving: ServingWorkload | None
    schema_findings: list[SchemaFinding] = field(default_factory=list)  # k8s_schema: each object vs its schema


def validate(path: Path, extra_manifests: list[Path]) -> Report:
    deploy = load_file(Deploy, path)
    check_workload(deploy.traffic, str(path), "traffic", None, current_limits())  # bounded work, said up front
    base = path.parent  # as the user named it: messages and --json hold the same paths wherever the checkout lies
    report = Report(deploy.name)
    try:
        target = _target(deploy, path, base, extra_manifests)
    except UnsupportedDeploymentError as exc:  # no workload the checks can read: what the files hold, named
        report.findings += [Finding(f.severity, f.check, f.message, f.fix) for f in exc.findings]
        report.deployment = {"model": None, "hardware": None, "replicas": 0, "engine": {}}
        return report
    report.findings += [Finding(f.severity, f.check, f.message, f.fix) for f in target.schema_findings]
    report.deployment = {
        "model": target.model,
        "hardware": target.hardware,
        "replicas": target.replicas,
        "engine": target.engine.model_dump(exclude_defaults=True),
    }
    if target.serving is not None:
        report.findings += [Finding(f.severity, "vllm-args", f.message, f.fix) for f in target.serving.command_findings]
        _check_manifests(report, target.serving, target)
        _check_gpu_scheduling(report, target.serving, target, deploy.gpus_per_node)
        _check_mig(report, target.serving)
        report.warnings += _not_modelled(target.serving)
    replica = _check_engine(report, deploy, target, base, str(path))
    if replica is not None:
        engine = replica.engine
        report.warnings += version_warnings(target.engine.vllm_version)
        deployment = replica.perf.deployment
        kept = window_kept(deployment.model, engine)
        report.warnings += model_warnings(deployment.model, engine.max_model_len, engine.weight_dtype, kept)
    if replica is not None and target.hardware is not None:
        weights = float(replica.memory.weight_bytes * replica.engine.tp) if replica.memory else 0.0  # one stage's
        if target.serving is not None:
            _check_probes_and_hpa(report, target.serving, weights, replica.engine)
        _predict(report, deploy, target, base)
    return report


def _read_manifests(files: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    documents = []
    for file in files:
        read = read_documents(file)
        if not read:
            raise InputError(str(file), "", "no Kubernetes object in it (empty, or only comments and --- separators)")
        documents += read
    return documents


def _target(deploy: Deploy, path: Path, base: Path, extra: list[Path]) -> Target:
    source = str(path)
    # a file named twice (in manifests: and by --manifest, one path relative, one not) is read once
    files = list({file.resolve(): file for file in [base / m for m in deploy.manifests] + list(extra)}.values())
    if not files:
        if deploy.model is None or deploy.hardware is None:
            missing = "model" if deploy.model is None else "hardware"
            raise InputError(
                source,
                missing,
                f"no {missing}: give Kubernetes manifests, or model and hardware (and engine arguments)",
            )
        engine = deploy.engine if deploy.engine is not None else EngineArgs(vllm_version=deploy.vllm_version)
        return Target(deploy.model, deploy.hardware, engine, deploy.replicas or 1, None)
    documents = _read_manifests(files)
    rendered = render_workloads(documents)  # formats.py: KServe resources and chart values as their workloads
    schema_findings = rendered.kept(check_objects(documents)) + rendered.findings  # before the deployment checks
    if deploy.model is not None:  # the deployment file names the model that KServe's storage holds
        schema_findings = [f for f in schema_findings if f.check != MODEL_SOURCE]
    documents = documents + rendered.documents
    try:
        serving = find_serving(documents, deploy.vllm_version)
    except NoServingWorkloadError as exc:
        unsupported = unsupported_deployment(documents, schema_findings)
        if unsupported is None:
            raise
        raise unsupported from exc
    if deploy.engine is not None or deploy.replicas is not None:
        field_name = "engine" if deploy.engine is not None else "replicas"
        raise InputError(
            source,
            field_name,
            f"the manifests set the {'engine arguments (vllm serve)' if field_name == 'engine' else 'replicas'}; "
            f"{field_name} is for a deployment without manifests: remove one or the other",
        )
    model = deploy.model or serving.model
    if model is None:
        raise InputError(
            serving.source, "vllm serve", "no model named (vllm serve MODEL) and none in the deployment file"
        )
    try:
        stages = {"pipeline_parallel_size": serving.pipeline_parallel} if serving.pipeline_parallel > 1 else {}
        fitted = {"calibration": deploy.calibration} if deploy.calibration else {}  # ttftsim fit's factors
        args = {"vllm_version": deploy.vllm_version, **serving.engine, **stages, **fitted}
        engine = EngineArgs.model_validate(args, context={COMMAND_LINE: True})  # strings, converted as argparse does
    except ValidationError as exc:
        error = exc.errors()[0]
        raise InputError(serving.source, "vllm args " + ".".join(str(p) for p in error["loc"]), error["msg"]) from None
    label = gpu_label(serving)
    pinned = _label_hardware(label) if label else None
    hardware = deploy.hardware or pinned
    schema_findings += _overrides(deploy, serving, pinned, source)
    return Target(model, hardware, engine, serving.replicas, serving, schema_findings)


def _overrides(deploy: Deploy, serving: ServingWorkload, pinned: str | None, source: str) -> list[SchemaFinding]:
    """The deployment file's model or hardware where the manifests say otherwise: predicted as the file says, with
    a warning naming both (a model served from a path is named by the file: no warning)."""
    notes = []
    served = serving.model
    if deploy.model and served and not served.startswith(("/", ".", "~")) and not _same_model(deploy.model, served):
        notes.append(
            SchemaFinding(
                "warning",
                "model",
                f"{source} predicts model {deploy.model}, but {serving.kind}/{serving.name} serves {served}",
                "remove model: from the deployment file, or make the two agree",
            )
        )
    if deploy.hardware and pinned and deploy.hardware != pinned:
        notes.append(
            SchemaFinding(
                "warning",
                "gpu-affinity",
                f"{source} predicts on {deploy.hardware}, but {serving.kind}/{serving.name} is pinned to {pinned} "
                "nodes",
                "remove hardware: from the deployment file, or make the two agree",
            )
        )
    return notes


def _same_model(named: str, served: str) -> bool:
    """The deployment file's name and the served id name one model (organisation, case, post-training tags,
    quantization suffixes and Meta- before Llama aside: model/hf_ids.py)."""

    return bool(name_key(parse_model_id(named).base) == name_key(parse_model_id(served).base))


def _check_gpu_scheduling(report: Report, serving: ServingWorkload, target: Target, per_node: int | None) -> None:
    """What keeps the pods Pending for ever, or lets them land on another GPU than the one predicted: a GPU request
    without an equal limit (the API server refuses the pod), more GPUs in one pod than a node has, a GPU vendor's
    resource on nodes pinned to the other vendor's GPU label, a nodeSelector and a required affinity naming
    different GPUs; and an affinity that allows several GPU types (a warning: one is predicted)."""
    where = f"{serving.kind}/{serving.name}"
    resources = serving.container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    for name in GPU_RESOURCES:
        if name in requests and str(requests[name]) != str(limits.get(name)):
            report.add(
                "error",
                "gpu-request",
                f"{where}: {name} request {requests[name]} without an equal limit ({limits.get(name, 'none')}); the "
                "API server refuses the pod (an extended resource's request and limit must be equal)",
                f"set resources.limits {name}: {requests[name]} (or only the limit)",
            )
    gpus = serving.gpu_request()
    per_node = per_node or _profile_gpus_per_node(target.hardware)
    if gpus is not None and per_node is not None and gpus > per_node:
        report.add(
            "error",
            "gpu-request",
            f"{where}: one pod requests {gpus} GPUs, but a {target.hardware} node has {per_node}: it stays Pending",
            "split it over nodes with a LeaderWorkerSet (one pod per node, --pipeline-parallel-size), or use fewer "
            "GPUs per pod",
        )
    selector, allowed = _gpu_constraints(serving.pod_spec)
    for key, value in selector.items():
        if key in allowed and value.lower() not in {v.lower() for v in allowed[key]}:
            report.add(
                "error",
                "gpu-affinity",
                f"{where}: nodeSelector {key}={value} and the required node affinity ({key} in "
                f"{', '.join(allowed[key])}) admit no node together: the pods stay Pending",
                "keep one of the two, naming the same GPU",
            )
    pinned = [(key, [value]) for key, value in selector.items()] + list(allowed.items())
    vendors = {vendor for key, values in pinned if (vendor := _label_vendor(key, values))}
    requested = {name.split("/", 1)[0] for name in GPU_RESOURCES if name in limits or name in requests}
    if vendors and requested and not requested & vendors:
        report.add(
            "error",
            "gpu-request",
            f"{where}: the pods request {', '.join(sorted(n for n in GPU_RESOURCES if n in limits or n in requests))} "
            f"but are pinned to nodes by {', '.join(sorted(vendors))} GPU labels: no such node offers it",
            "request the GPU resource of the vendor the nodes are pinned to",
        )
    for key, values in allowed.items():
        kinds = list(dict.fromkeys(h for h in (_label_hardware(v) for v in values) if h))
        if len(kinds) > 1:
            report.add(
                "warning",
                "gpu-affinity",
                f"{where}: the required node affinity allows {key} in {', '.join(values)}: the pods may land on "
                f"{', '.join(kinds)}; predicted on {target.hardware}"
                + (" (the slowest)" if target.hardware in kinds else ""),
                "pin one GPU type, or validate once per type (hardware: in the deployment file)",
            )


def _profile_gpus_per_node(hardware: str | None) -> int | None:
    """The profile's GPUs per node; None without a known profile (an unknown or ambiguous name: the engine check
    says so, naming the deployment file)."""
    try:
        return load_hardware(hardware).gpus_per_node if hardware else None
    except InputError:
        return None


def _label_vendor(key: str, values: list[str]) -> str | None:
    """Whose GPUs a node label pins (the device plugin's resource domain): amd.com, nvidia.com, or None (a label
    that does not say, e.g. Karpenter's instance-gpu-name)."""
    if "amd.com/" in key:
        return "amd.com"
    if key.startswith("nvidia.com/") or (values and all(v.lower().startswith("nvidia") for v in values)):
        return "nvidia.com"
    return None


def _gpu_constraints(pod_spec: dict[str, Any]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The pod's nodeSelector values and the values its required node affinity allows on each GPU label key.
    Kubernetes ORs the nodeSelectorTerms and ANDs the expressions in one (k8s.io/component-helpers
    scheduling/corev1/nodeaffinity): a key is constrained only where every term constrains it (a term that names
    another label admits any GPU), to the union over the terms of the `In` values each term allows (the
    intersection of its own `In` expressions on that key); a term with no expressions matches no node."""
    keys = node_label_keys()
    selector = {k: str(v) for k, v in (pod_spec.get("nodeSelector") or {}).items() if k in keys}
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = [_term_values(term, keys) for term in required.get("nodeSelectorTerms") or [] if _matches_some(term)]
    allowed: dict[str, list[str]] = {}
    for key in keys:
        if terms and all(key in term for term in terms):
            allowed[key] = list(dict.fromkeys(value for term in terms for value in term[key]))
    return selector, allowed


def _matches_some(term: Any) -> bool:
    return isinstance(term, dict) and bool(term.get("matchExpressions") or term.get("matchFields"))


def _term_values(term: dict[str, Any], keys: tuple[str, ...]) -> dict[str, list[str]]:
    """The `In` values one nodeSelectorTerm allows on each GPU label key it constrains (ANDed: their intersection)."""
    values: dict[str, list[str]] = {}
    for expression in term.get("matchExpressions") or []:
        key = expression.get("key")
        if key in keys and expression.get("operator") == "In":
            listed = [str(v) for v in expression.get("values") or []]
            values[key] = [v for v in values[key] if v in listed] if key in values else listed
    return values


def _mig_slices(serving: ServingWorkload) -> list[str]:
    """The MIG slice resources the vLLM container requests (nvidia.com/mig-3g.40gb, ...)."""
    resources = serving.container.get("resources") or {}
    return sorted({k for part in ("limits", "requests") for k in (resources.get(part) or {}) if k.startswith(MIG)})


def _check_mig(report: Report, serving: ServingWorkload) -> None:
    slices = _mig_slices(serving)
    if slices and not serving.gpu_request():
        report.add(
            "warning",
            "gpu-request",
            f"{serving.kind}/{serving.name}: the vLLM container requests a MIG slice ({', '.join(slices)}): slices "
            "are not modelled, the prediction is a whole GPU's (a slice has a fraction of its memory and compute)",
            "treat the prediction as a bound the slice will not reach",
        )


def _check_gpu_count(report: Report, serving: ServingWorkload, target: Target) -> None:
    """The GPUs the pods request against those vLLM uses (tensor x pipeline x data parallel): fewer is an error; more
    in a single pod a warning (vLLM starts on the first devices it sees, the rest idle)."""
    other = serving.pipeline_parallel * target.engine.data_parallel_size  # GPUs per tensor-parallel group
    used, gpus, size = target.engine.tensor_parallel_size * other, serving.gpu_request(), serving.group_size
    where = f"{serving.kind}/{serving.name}"
    if not gpus:
        _no_gpu_request(report, serving, used)
        return
    total = gpus * size
    if total == used:
        return
    fitting_tp = f", or set --tensor-parallel-size {total // other}" if total % other == 0 else ""
    fitting_tp = fitting_tp if total <= MAX_GPUS_PER_REPLICA else ""
    if size == 1 and gpus > used:
        report.add(
            "warning",
            "tp-vs-gpus",
            f"{where}: the pod requests {counted(gpus, 'GPU')} but vLLM uses {used} (tensor x pipeline x data "
            f"parallel): {counted(gpus - used, 'GPU')} idle and paid for; predicted on {used}",
            f"request {counted(used, 'GPU')} per pod{fitting_tp}",
        )
        return
    report.add(
        "error",
        "tp-vs-gpus",
        f"{where}: tensor x pipeline x data parallel = {used} GPUs, but the pod group requests "
        f"{gpus} x {size} = {total}",
        f"request {counted(used // size, 'GPU')} per pod{fitting_tp}",
    )


def _no_gpu_request(report: Report, serving: ServingWorkload, tp: int) -> None:
    if _mig_slices(serving):  # _check_mig says what a slice means
        return
    report.add(
        "error",
        "gpu-request",
        f"{serving.kind}/{serving.name}: the vLLM container requests no nvidia.com/gpu; it may land on a CPU node and "
        "sees no GPU anyway",
        f"set resources.limits nvidia.com/gpu: {tp // max(serving.group_size, 1)}",
    )


def _check_manifests(report: Report, serving: ServingWorkload, target: Target) -> None:
    where = f"{serving.kind}/{serving.name}"
    tp = target.engine.tensor_parallel_size * serving.pipeline_parallel * target.engine.data_parallel_size
    _check_gpu_count(report, serving, target)
    label = gpu_label(serving)
    unknown = _unknown_gpu_keys(serving) if label is None and serving.hardware_label() is None else []
    if unknown:  # pinned on a label of the cluster's own: the GPU type is there, ttftsim cannot read it
        known = ", ".join(node_label_keys()[:3])
        report.add(
            "info" if target.hardware else "error",
            "gpu-affinity",
            f"{where}: the pods select on {', '.join(unknown)}, not a GPU type label ttftsim reads ({known}, ...)"
            + ("" if target.hardware else ": ttftsim cannot tell which GPU they get"),
            "set hardware in the deployment file" if not target.hardware else "",
        )
    elif label is None:
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
    elif label.upper().endswith(SHARED_SUFFIX) and _label_hardware(label):
        report.add(
            "warning",
            "gpu-affinity",
            f"{where}: GPU label value {label!r} is a time-sliced GPU (NVIDIA GPU Feature Discovery renames shared "
            "GPUs' product label with -SHARED): other pods share its memory and compute, which the prediction "
            f"(a whole {_label_hardware(label)}) does not include",
            "give the vLLM pods whole GPUs (a node pool without time-slicing)",
        )
    elif _label_hardware(label) is None:  # no GPU to predict on: a gate that passed here would have checked nothing
        report.add(
            "warning" if target.hardware else "error",
            "gpu-affinity",
            f"{where}: unknown GPU label value {label!r}"
            + ("" if target.hardware else ": ttftsim cannot tell the GPU, so memory and the SLO go unchecked"),
            "" if target.hardware else "set hardware in the deployment file (e.g. hardware: H100-SXM5-80GB)",
        )
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
    if tp > 1 and not _has_shm(serving):
        report.add(
            "warning",
            "shared-memory",
            f"{where}: {tp} GPUs a replica (tensor x pipeline x data parallel) without an in-memory /dev/shm "
            "volume; NCCL falls back or fails with the 64 MB default",
            "mount an emptyDir with medium: Memory at /dev/shm",
        )


def _unknown_gpu_keys(serving: ServingWorkload) -> list[str]:
    """Node label keys the pods select on that look like a GPU type (gpu or accelerator in the key) but are none
    the hardware profiles name GPUs by (a cluster's own labels, gpu.nvidia.com/model)."""
    keys = set((serving.pod_spec.get("nodeSelector") or {}).keys())
    required = ((serving.pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        keys |= {str(e.get("key")) for e in term.get("matchExpressions") or [] if isinstance(e, dict)}
    known = set(node_label_keys())
    return sorted(
        k
        for k in keys
        if k not in known
        and ("gpu" in k.lower() or "accelerator" in k.lower())
        and not k.startswith(VENDOR_LABEL_PREFIXES)  # GPU Feature Discovery's presence, count, family, memory
    )


def gpu_label(serving: ServingWorkload) -> str | None:
    """The GPU label value the prediction takes: the nodeSelector's, else, where the required node affinity allows
    several known GPU types, the slowest of them (least bf16 compute, then least memory: TTFT is a prefill's
    compute, and the answer no longer follows the order the values are listed in); else an unknown value (an error
    finding); None where no GPU label is constrained by every term (a term on another label admits any GPU)."""
    selector, allowed = _gpu_constraints(serving.pod_spec)
    if selector:
        return next(iter(selector.values()))
    known = [(value, found) for values in allowed.values() for value in values if (found := _label_hardware(value))]
    if not known:  # no GPU constrained by every term (one admits any GPU): None; else the unknown value, named
        return next((value for values in allowed.values() for value in values), None)
    profiles = {hardware: load_hardware(hardware) for _, hardware in known}

    def strength(item: tuple[str, str]) -> tuple[float, int, str]:
        profile = profiles[item[1]]
        return profile.peak_flops.bf16, profile.memory_bytes, item[1]

    return min(known, key=strength)[0]


def _label_hardware(label: str) -> str | None:
    """The profile a GPU label value names; a time-sliced GPU's label (the product with -SHARED appended, GPU
    Feature Discovery's `renameByDefault`) names the GPU it shares."""
    found = hardware_for_label(label)
    if found is None and label.upper().endswith(SHARED_SUFFIX):
        found = hardware_for_label(label[: -len(SHARED_SUFFIX)])
    return found


def _not_modelled(serving: ServingWorkload) -> list[str]:
    """What the manifests' vllm command sets that the prediction leaves out, one warning each."""
    where = f"{serving.kind}/{serving.name}"
    warnings = []
    for flag in serving.not_modelled:
        warnings.append(f"vLLM flag {flag} ({where}) is parsed but not modelled: its effect is not predicted")
    return warnings


def _has_shm(serving: ServingWorkload) -> bool:
    mounts = serving.container.get("volumeMounts") or []
    return any(str(m.get("mountPath", "")).rstrip("/") == "/dev/shm" for m in mounts)


def _check_engine(report: Report, deploy: Deploy, target: Target, base: Path, source: str) -> Any:
    if deploy.model is None and target.serving is not None and target.model.startswith(("/", ".", "~")):
        raise InputError(  # a path in the container: the machine running validate has other files there
            target.serving.source,
            "vllm serve",
            f"the model {target.model} is a path inside the container, not read from this machine; name the model "
            f"in {source} (model: a Hugging Face id or a preset, ttftsim models)",
        )
    try:
        model = load_model(resolve_ref(target.model, base), source)
    except InputError as exc:
        if deploy.model is not None or target.serving is None or not exc.message.startswith(UNKNOWN_MODEL_ERRORS):
            raise  # a config.json's own error names its file and field
        # the name came from the manifests' vllm command (KServe serves a local path such as /mnt/models)
        raise InputError(
            target.serving.source,
            "vllm serve",
            f"{exc.message}; name the model in {source} (model: a Hugging Face id or a preset, ttftsim models)",
        ) from None
    tp = target.engine.tensor_parallel_size
    if model.num_attention_heads % tp:
        report.add(
            "error",
            "tp-vs-heads",
            f"--tensor-parallel-size {tp} does not divide {model.name}'s {model.num_attention_heads} attention heads; "
            "vLLM refuses to start",
            f"use a TP that divides {model.num_attention_heads}",
        )
        return None
    if target.hardware is None:
        return None
    hardware = load_hardware(resolve_ref(target.hardware, base), source)
    scenario = _scenario(deploy, target, 1)
    try:
        replica = build_replica(scenario, base, source)
    except DoesNotFitError as exc:
        where = f"{target.serving.kind}/{target.serving.name} ({target.serving.source}): " if target.serving else ""
        report.add(
            "error",
            "memory-fit",
            f"{where}does not fit: {exc}",
            "raise tensor parallelism, quantize, or lower max_model_len",
        )
        return None
    except InputError as exc:
        if exc.source == source and exc.field.startswith("engine") and target.serving is not None:
            # the engine arguments came from the manifests' vllm command line, not from the deployment file
            parts = exc.field.split(".")  # engine.<dest> is a flag; deeper fields (LMCACHE_* env, JSON keys) are not
            flag = "--" + parts[1].replace("_", "-") if len(parts) == 2 else "vllm serve"
            exc = InputError(target.serving.source, flag, exc.message)
        report.add("error", "engine", exc.one_line())  # names the file and field (a calibration file, ...)
        return None
    engine = replica.engine
    capacity = replica.num_blocks * engine.block_size
    worst = engine.max_model_len * engine.max_num_seqs
    report.add(
        "info",
        "kv-capacity",
        f"KV cache {capacity:,} tokens on {engine.rank_gpus} x {hardware.name}"
        + (f" (each of {engine.dp} data-parallel engines)" if engine.dp > 1 else "")
        + f"; max_model_len x max_num_seqs = {worst:,}",
    )
    longest = Request(0, 0.0, engine.max_model_len - 1, 1, ((0, engine.max_model_len - 1),))
    if engine.windowed_kv is not None and (why := rejection(engine, replica.num_blocks, longest)):
        # vLLM 0.15.1's start-up check sizes one sequence by the first (sliding-window) group: it starts
        report.add(
            "warning",
            "kv-capacity",
            f"one request of max_model_len {engine.max_model_len:,} tokens cannot be held: {why}; vLLM starts (its "
            "check sizes a sequence by the sliding-window layers) and such a request is never scheduled",
            "lower --max-model-len, or add KV memory (TP, fp8 KV cache)",
        )
    return replica


def _kv_pressure(report: Report, result: Any, scenario: Any, base: Path) -> None:
    """Fewer sequences of the traffic's mean context fit the KV cache than max_num_seqs: a warning when the
    prediction preempted requests for it, an info line when the traffic never filled the batch that far."""
    engine = result.replica.engine
    mean_context = _mean_context(scenario, base)
    fits_seqs = result.replica.num_blocks * engine.block_size // max(int(mean_context), 1)
    if fits_seqs >= engine.max_num_seqs:
        return
    preemptions = int(result.requests["num_preemptions"].sum())
    holds = (
        f"at the traffic's mean context (~{mean_context:,.0f} tokens) the KV cache holds {fits_seqs} sequences, "
        f"fewer than max_num_seqs {engine.max_num_seqs}"
    )
    if preemptions:
        report.add(
            "warning",
            "kv-capacity",
            f"{holds}: {counted(preemptions, 'preemption')} predicted (a preempted request computes its KV again)",
            f"lower --max-num-seqs to {max(fits_seqs, 1)}, or add KV memory (TP, fp8 KV cache)",
        )
    else:
        report.add("info", "kv-capacity", f"{holds}; this traffic never fills the batch that far (no preemption)")


def _mean_context(scenario: Any, base: Path) -> float:
    """Mean prompt + output tokens of the traffic (its open-loop requests; a conversation's first turns)."""
    workload = scenario.workload
    if isinstance(workload, ConversationWorkload) or (
        isinstance(workload, SyntheticWorkload) and workload.arrivals.type == "closed_loop"
    ):
        sample = simulate(scenario.model_copy(update={"horizon_s": 60.0}), base).requests
        return float((sample["prompt_tokens"] + sample["output_tokens"]).mean()) if len(sample) else 0.0
    requests = open_loop_requests(workload, WorkloadContext(np.random.default_rng(0), base))
    return float(np.mean([r.prompt_tokens + r.output_tokens for r in requests])) if requests else 0.0


def _check_probes_and_hpa(report: Report, serving: ServingWorkload, weights: float, engine: ResolvedEngine) -> None:
    where = f"{serving.kind}/{serving.name}"
    graphs = engine.cudagraph_mode != "NONE"  # an eager engine compiles and captures nothing (config/graphs.py)
    phases = cold_start_phases(PodSpec(), weights, engine.tp, NodeCaches(True, False, False), engine.compiled, graphs)
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
                "(weights, compile, CUDA graphs): the pod restarts forever",
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


def _scenario(deploy: Deploy, target: Target, replicas: int, cluster: bool = False) -> Any:
    data: dict[str, Any] = {
        "name": deploy.name,
        "model": target.model,
        "hardware": target.hardware,
        "engine": target.engine.model_dump(),
        "workload": deploy.traffic.model_dump(),
    }
    if cluster:  # a Kubernetes Service spreads connections evenly: round robin
        args = target.engine  # a replica's GPUs: TP x PP x DP (a pipeline over an LWS group spans its nodes)
        gpus = args.tensor_parallel_size * args.pipeline_parallel_size * args.data_parallel_size
        data["cluster"] = fixed_cluster(str(target.hardware), replicas, gpus, "round_robin", 0, deploy.gpus_per_node)
    return Scenario.model_validate(data)


def _predict(report: Report, deploy: Deploy, target: Target, base: Path) -> None:
    replicas = _predicted_replicas(report, target)
    if replicas == 0:
        return
    scenario = _scenario(deploy, target, replicas, cluster=True)
    result = simulate(scenario, base)
    figures = slo_figures(result.requests, deploy.slo, (result.itl_values, result.itl_weights))
    report.prediction = Prediction(replicas, result.replica.kernel_costs, figures)
    _kv_pressure(report, result, scenario, base)
    for stall in result.stall_warnings():  # why requests went unserved, when an engine stopped for good
        report.add("warning", "stall", stall)
    refused = _refused(report, result.requests)
    verdict = judge(deploy.slo, figures)
    checks = [] if verdict is None else list(verdict.checks)
    if verdict is None or verdict.met:
        report.add("info", "slo", f"predicted {_checks_text(checks)} with {counted(replicas, 'replica')} meets the SLO")
        return
    missed = [check for check in checks if not check.is_met]
    if refused and _served(result.requests, deploy.slo, result).meets(deploy.slo):
        # the refused requests alone miss it: they are refused on any number of replicas
        report.add(
            "error",
            "slo",
            f"predicted {_checks_text(missed)} with {counted(replicas, 'replica')} misses the SLO",
            "serve the refused requests first (the rejected finding): more replicas refuse them too",
        )
        return
    floor = _lone_decode_s(result) if target.engine.speculative_config is None else 0.0
    beyond = [check for check in missed if check.target.startswith(("tpot", "itl")) and floor > check.target_s]
    if beyond:  # a lower bound no replica count moves: every token of a request alone takes a decode step
        report.add(
            "error",
            "slo",
            f"predicted {_checks_text(missed)} with {counted(replicas, 'replica')} misses the SLO",
            f"a request alone on a replica waits {floor:.4f} s a token (one sequence's decode step at the median "
            f"prompt), over the {_checks_text(beyond, figures=False)}: more replicas cannot meet it; a faster GPU, "
            "more tensor parallelism or quantization might (ttftsim plan)",
        )
        return
    needed = None
    for extra in range(1, MAX_EXTRA_REPLICAS + 1):
        run = simulate(_scenario(deploy, target, replicas + extra, cluster=True), base)
        more = _served(run.requests, deploy.slo, run) if refused else _figures(run.requests, deploy.slo, run)
        if more.meets(deploy.slo):
            needed = replicas + extra
            break
    report.add(
        "error",
        "slo",
        f"predicted {_checks_text(missed)} with {counted(replicas, 'replica')} misses the SLO",
        (f"run {needed} replicas (minReplicas)" if _scaled(target) else f"run {needed} replicas (replicas: {needed})")
        + (" and serve the refused requests (the rejected finding)" if refused else "")
        if needed
        else f"more than {replicas + MAX_EXTRA_REPLICAS} replicas, or a faster configuration (ttftsim plan)",
    )


def _figures(requests: Any, slo: Any, result: Any) -> Any:
    return slo_figures(requests, slo, (result.itl_values, result.itl_weights))


def _served(requests: Any, slo: Any, result: Any) -> Any:
    """The SLO figures of the requests the engine did not refuse (what more replicas can change)."""
    return _figures(requests[requests["status"] != "rejected"], slo, result)


def _scaled(target: Target) -> bool:
    """An HPA scales the workload (its minReplicas is what to raise)."""
    return target.serving is not None and target.serving.scaling_hpa() is not None


def _refused(report: Report, requests: Any) -> int:
    """Requests the engine refuses whatever the load (longer than max_model_len, more KV than the cache): an error
    finding with the commonest reason and what would admit them; how many."""
    rejected = requests["status"] == "rejected"
    count = int(rejected.sum())
    if not count:
        return 0
    reasons = requests.loc[rejected, "reason"].astype(str)
    shapes = reasons.str.replace(r"\d[\d,]*", "N", regex=True)  # one reason, whatever its numbers
    kinds = shapes.value_counts()
    example = reasons[shapes == kinds.index[0]].iloc[0]
    too_long = reasons.str.contains("tokens exceed max_model_len", regex=False)
    lengths = (requests["prompt_tokens"] + requests["output_tokens"])[rejected]
    others = f" (and {counted(len(kinds) - 1, 'other reason')})" if len(kinds) > 1 else ""
    fix = (
        f"raise --max-model-len to at least {int(lengths[too_long].max()):,} (the longest prompt + output refused "
        "for it), or bound the traffic's lengths"
        if "tokens exceed max_model_len" in example
        else "more KV memory (tensor parallelism, an fp8 KV cache, a higher --gpu-memory-utilization), or shorter "
        "requests"
    )
    report.add(
        "error",
        "rejected",
        f"{counted(count, 'request')} of {len(requests):,} ({count / len(requests):.1%}) are refused by the engine, "
        f"e.g. {example}{others}",
        fix,
    )
    return count


def _predicted_replicas(report: Report, target: Target) -> int:
    """The replicas the prediction runs with: the minReplicas of the HPA that scales the workload (or KEDA's
    minReplicaCount), else the workload's own count. Zero: scaled to nothing without an autoscaler is an error
    (nothing serves the traffic, no prediction); an autoscaler's minimum of 0 (scale to zero: HPAScaleToZero,
    KEDA's default) runs 1 with a warning."""
    serving = target.serving
    hpa = serving.scaling_hpa() if serving is not None else None
    keda = serving.keda if serving is not None and hpa is None else None
    if hpa is not None:
        scaler, field, low = (
            f"HPA {hpa.get('metadata', {}).get('name')}",
            "minReplicas",
            _minimum(hpa, "minReplicas", 1),
        )
        how = "(feature gate HPAScaleToZero)"
    elif keda is not None:  # KEDA's minReplicaCount (default 0: scale to zero, activated by its triggers)
        scaler, field = f"ScaledObject {(keda.get('metadata') or {}).get('name')}", "minReplicaCount"
        low, how = _minimum(keda, "minReplicaCount", 0), "(KEDA's triggers are not modelled)"
    else:
        if target.replicas == 0:
            where = f"{serving.kind}/{serving.name}" if serving is not None else report.name
            report.add(
                "error",
                "replicas",
                f"{where}: 0 replicas and no HPA scales it: nothing serves the traffic",
                "set replicas >= 1, or an HPA with minReplicas >= 1",
            )
        return target.replicas
    if low == 0:
        report.add(
            "warning",
            "hpa",
            f"{scaler}: {field} 0 scales to zero {how}: predicted with 1 replica; a request after an idle spell waits "
            "for a whole cold start",
            f"keep {field} >= 1 where the TTFT SLO must hold after idle spells",
        )
    return max(low, 1)


def _minimum(scaler: dict[str, Any], field: str, default: int) -> int:
    return int((scaler.get("spec") or {}).get(field, default))


def _lone_decode_s(result: Any) -> float:
    """The time of one decode step with a single sequence at the median prompt's context: the least a token can
    take on this configuration (the API server's and the client's time come on top)."""
    prompts = result.requests["prompt_tokens"]
    if prompts.empty:
        return 0.0
    return float(result.replica.perf.decode_step_s(1)(int(prompts.median()) + 1))


def _checks_text(checks: list[SloCheck], figures: bool = True) -> str:
    """`P99 TTFT 0.122 s (target 0.5 s), P99 TPOT 0.014 s (target 0.001 s)`; a priority class's with its class;
    without `figures`: `P99 TTFT target 0.5 s, ...`."""
    parts = []
    for check in checks:
        who = "" if check.priority is None else f"priority {check.priority} "
        figure = math.inf if check.figure_s is None else check.figure_s
        if check.target == "goodput_share":
            share = f"{figure:.1%}" if math.isfinite(figure) else "none"
            parts.append(f"{who}goodput {share} of arrivals (target {check.target_s:.1%})")
            continue
        metric, _, level = check.target.removesuffix("_s").partition("_")
        level = "mean" if level == "mean" else level.upper()
        if not figures:
            parts.append(f"{who}{level} {metric.upper()} target {check.target_s:g} s")
            continue
        shown = "none" if check.figure_s is None else _seconds(figure)  # a priority class with no arrivals
        parts.append(f"{who}{level} {metric.upper()} {shown} (target {check.target_s:g} s)")
    return ", ".join(parts) or "figures"


def _seconds(value: float) -> str:
    return "never (requests go unserved)" if not math.isfinite(value) else f"{value:.3f} s"
