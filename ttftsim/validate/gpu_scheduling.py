"""Whether the vLLM pods get the GPUs the prediction assumes. Errors for pods that stay Pending (a GPU request
without an equal limit, more GPUs in a pod than a node has, another vendor's GPU resource, a nodeSelector and a
required affinity naming different GPUs) and for GPU requests that do not match tensor x pipeline x data parallel;
warnings for an affinity allowing several GPU types, idle GPUs in a pod and MIG slices (not modelled: predicted as
whole GPUs). Also reads the GPU type the pods are pinned to (gpu_label, label_hardware). Taints, tolerations,
preferred affinity and the room left on the nodes are not checked."""

from __future__ import annotations

from typing import Any

from ttftsim.errors import InputError
from ttftsim.hardware.catalog import hardware_for_label, load_hardware, node_label_keys
from ttftsim.inputs.files import counted
from ttftsim.validate.gpu_request_advice import fitting_tp, misspelt_gpu_resource
from ttftsim.validate.manifests import ServingWorkload
from ttftsim.validate.report import Report
from ttftsim.validate.serving_container import GPU_RESOURCES
from ttftsim.validate.target import Target

SHARED_SUFFIX = "-SHARED"  # k8s-device-plugin sharing.timeSlicing.renameByDefault

# label namespaces of the vendors' feature discovery: their GPU type labels are the profiles' (node_label_keys); the
# rest (nvidia.com/gpu.present, .count, .family, .memory) do not pin a GPU type
VENDOR_LABEL_PREFIXES = ("nvidia.com/", "amd.com/", "beta.amd.com/", "feature.node.kubernetes.io/")
MIG = "nvidia.com/mig-"  # MIG slices' resources (nvidia.com/mig-3g.40gb, ...)


def check_gpu_scheduling(report: Report, serving: ServingWorkload, target: Target, per_node: int | None) -> None:
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
    _check_pinned_gpus(report, where, selector, allowed, resources)
    _check_several_gpu_types(report, where, allowed, target.hardware)


def _check_pinned_gpus(
    report: Report, where: str, selector: dict[str, str], allowed: dict[str, list[str]], resources: dict[str, Any]
) -> None:
    """The GPU labels the pods are pinned to: a nodeSelector and a required affinity that admit no node together,
    and a GPU resource of a vendor the pinned nodes are not (both leave the pods Pending)."""
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
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


def _check_several_gpu_types(report: Report, where: str, allowed: dict[str, list[str]], hardware: str | None) -> None:
    """A required affinity that admits several known GPU types: a warning, since one of them is predicted."""
    for key, values in allowed.items():
        kinds = list(dict.fromkeys(h for h in (label_hardware(v) for v in values) if h))
        if len(kinds) > 1:
            report.add(
                "warning",
                "gpu-affinity",
                f"{where}: the required node affinity allows {key} in {', '.join(values)}: the pods may land on "
                f"{', '.join(kinds)}; predicted on {hardware}" + (" (the slowest)" if hardware in kinds else ""),
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


def check_mig(report: Report, serving: ServingWorkload) -> None:
    slices = _mig_slices(serving)
    if slices and not serving.gpu_request():
        report.add(
            "warning",
            "gpu-request",
            f"{serving.kind}/{serving.name}: the vLLM container requests a MIG slice ({', '.join(slices)}): slices "
            "are not modelled, the prediction is a whole GPU's (a slice has a fraction of its memory and compute)",
            "treat the prediction as a bound the slice will not reach",
        )


def check_gpu_count(report: Report, serving: ServingWorkload, target: Target) -> None:
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
    per_node = _profile_gpus_per_node(target.hardware) if size == 1 else None  # a group spans nodes
    tp = fitting_tp(total, other, per_node, target.model)
    fitting = f", or set --tensor-parallel-size {tp}" if tp is not None else ""
    if size == 1 and gpus > used:
        report.add(
            "warning",
            "tp-vs-gpus",
            f"{where}: the pod requests {counted(gpus, 'GPU')} but vLLM uses {used} (tensor x pipeline x data "
            f"parallel): {counted(gpus - used, 'GPU')} idle and paid for; predicted on {used}",
            f"request {counted(used, 'GPU')} per pod{fitting}",
        )
        return
    report.add(
        "error",
        "tp-vs-gpus",
        f"{where}: tensor x pipeline x data parallel = {used} GPUs, but the pod group requests "
        f"{gpus} x {size} = {total}",
        f"request {counted(used // size, 'GPU')} per pod{fitting}",
    )


def _no_gpu_request(report: Report, serving: ServingWorkload, tp: int) -> None:
    if _mig_slices(serving):  # check_mig says what a slice means
        return
    misspelt = misspelt_gpu_resource(serving.container)
    if misspelt is not None:
        written, meant, quantity = misspelt
        report.add(
            "error",
            "gpu-request",
            f"{serving.kind}/{serving.name}: the vLLM container requests {written}, a resource no node advertises "
            f"(the device plugin's is {meant}): the pod stays Pending",
            f"rename it {meant}: {quantity}",
        )
        return
    report.add(
        "error",
        "gpu-request",
        f"{serving.kind}/{serving.name}: the vLLM container requests no nvidia.com/gpu; it may land on a CPU node and "
        "sees no GPU anyway",
        f"set resources.limits nvidia.com/gpu: {tp // max(serving.group_size, 1)}",
    )


def unknown_gpu_keys(serving: ServingWorkload) -> list[str]:
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
    known = [(value, found) for values in allowed.values() for value in values if (found := label_hardware(value))]
    if not known:  # no GPU constrained by every term (one admits any GPU): None; else the unknown value, named
        return next((value for values in allowed.values() for value in values), None)
    profiles = {hardware: load_hardware(hardware) for _, hardware in known}

    def strength(item: tuple[str, str]) -> tuple[float, int, str]:
        profile = profiles[item[1]]
        return profile.peak_flops.bf16, profile.memory_bytes, item[1]

    return min(known, key=strength)[0]


def label_hardware(label: str) -> str | None:
    """The profile a GPU label value names; a time-sliced GPU's label (the product with -SHARED appended, GPU
    Feature Discovery's `renameByDefault`) names the GPU it shares."""
    found = hardware_for_label(label)
    if found is None and label.upper().endswith(SHARED_SUFFIX):
        found = hardware_for_label(label[: -len(SHARED_SUFFIX)])
    return found
