"""Read what `ttftsim validate` needs from real Kubernetes manifests: the serving workload (Deployment,
StatefulSet or LeaderWorkerSet), its vLLM container and `vllm serve` arguments, resources, placement
rules, probes, volumes, and the HPA that scales it. Which container of the pod is the vLLM server is
serving_container.py's. Which node labels name a GPU, and which values mean which GPU, is the hardware
profiles' (hwprofiles/*.yaml node_labels), never a table here."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttftsim.config.engine import EngineArgs
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import node_label_keys
from ttftsim.inputs.files import read_text
from ttftsim.inputs.structured import parse_yaml_documents
from ttftsim.validate.container_command import container_words_are_shell
from ttftsim.validate.container_env import ConfigData, config_data, literal_env, missing_keys, undefined_references
from ttftsim.validate.manifest_shapes import check_document
from ttftsim.validate.serving_container import GPU_RESOURCES, listening_port, vllm_containers
from ttftsim.validate.vllm_command import read_vllm_container
from ttftsim.validate.vllm_invocation import CommandFinding, VllmCommand

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet")
DEFAULT_VLLM = str(EngineArgs.model_fields["vllm_version"].default)


class NoServingWorkloadError(InputError):
    """The manifests hold no workload with a vLLM container (validate names what they hold instead)."""


@dataclass
class ServingWorkload:
    """The serving pods as the manifests declare them."""

    source: str
    kind: str
    name: str
    replicas: int
    group_size: int  # pods per replica (LeaderWorkerSet size)
    container: dict[str, Any]
    pod_spec: dict[str, Any]
    model: str | None
    engine: dict[str, Any]
    pipeline_parallel: int = 1
    not_modelled: list[str] = field(default_factory=list)
    hpa: dict[str, Any] | None = None
    hpa_source: str = ""
    keda: dict[str, Any] | None = None  # a KEDA ScaledObject that scales the workload
    workloads: set[tuple[str, str]] = field(default_factory=set)  # (kind, name) of every workload in the files
    command_findings: list[CommandFinding] = field(default_factory=list)  # vllm_command.py and its checks: refusals
    port: int | None = None  # where vLLM listens (--port, default 8000); None: its command line does not say

    def is_scaled_by(self, hpa: dict[str, Any]) -> bool:
        """The HPA's scaleTargetRef names this workload."""
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        return bool(ref.get("name") == self.name and ref.get("kind") == self.kind)

    def scaling_hpa(self) -> dict[str, Any] | None:
        """The HPA that scales this workload (None: none does; another workload's HPA is not this one's)."""
        return self.hpa if self.hpa is not None and self.is_scaled_by(self.hpa) else None

    def gpu_request(self) -> int | None:
        """GPUs per pod: the device plugin's resource, NVIDIA's or AMD's (ROCm k8s-device-plugin)."""
        resources = self.container.get("resources") or {}
        for part in ("limits", "requests"):
            for name in GPU_RESOURCES:
                value = (resources.get(part) or {}).get(name)
                if value is not None:
                    return int(value)
        return None

    def hardware_label(self) -> str | None:
        """The GPU type the pods are pinned to, from nodeSelector or required node affinity."""
        labels = node_label_keys()  # the keys hwprofiles/ name GPUs by
        selector = self.pod_spec.get("nodeSelector") or {}
        for label in labels:
            if label in selector:
                return str(selector[label])
        required = ((self.pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}
        for term in required.get("nodeSelectorTerms") or []:
            for expression in term.get("matchExpressions") or []:
                if expression.get("key") in labels and expression.get("operator") == "In":
                    values = expression.get("values") or []
                    if values:
                        return str(values[0])
        return None


def read_documents(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The file's Kubernetes objects (ttftsim/inputs: size, UTF-8, bounded YAML), each shape-checked."""
    source = str(path)
    documents = [d for d in parse_yaml_documents(read_text(path, what="manifest file"), source) if d is not None]
    out = []
    for index, document in enumerate(documents):
        if isinstance(document, dict) and "kind" not in document and "apiVersion" not in document:
            out.append((f"{source}#{index}", document))  # Helm values or other YAML: k8s_schema names it
            continue
        if not isinstance(document, dict) or "kind" not in document:
            raise InputError(source, f"document {index}", "not a Kubernetes object (no kind)")
        check_document(document, f"{source}#{index}")
        if document.get("kind") == "List":
            for item_index, item in enumerate(document.get("items") or []):
                check_document(item, f"{source}#{index}.items.{item_index}")
                out.append((f"{source}#{index}", item))
        else:
            out.append((f"{source}#{index}", document))
    return out


def _the_one(found: list[ServingWorkload]) -> ServingWorkload:
    """The only vLLM workload; several are an error: checking one and passing the files would hide the others'
    problems from a CI gate."""
    if len(found) > 1:
        names = ", ".join(f"{s.kind}/{s.name} ({s.source})" for s in found)
        raise InputError(
            found[1].source,
            "",
            f"{len(found)} workloads with a vLLM container ({names}); validate checks one deployment: give each "
            "its own deploy file (its manifests: list)",
        )
    return found[0]


def find_serving(documents: list[tuple[str, dict[str, Any]]], vllm_version: str = DEFAULT_VLLM) -> ServingWorkload:
    """The one workload with a vLLM container, its command line read as `vllm_version` parses it (several: an
    error naming them)."""
    found = []
    for source, document in documents:
        if document.get("kind") not in WORKLOAD_KINDS:
            continue
        found += _serving_workloads(source, document, documents, vllm_version)
    if not found:
        raise NoServingWorkloadError(
            ", ".join(sorted({s.split("#")[0] for s, _ in documents})) or "manifests",
            "",
            "no Deployment, StatefulSet or LeaderWorkerSet with a vLLM container (vllm serve ...)",
        )
    serving = _the_one(found)
    serving.workloads = {
        (str(d["kind"]), str((d.get("metadata") or {}).get("name", "")))
        for _, d in documents
        if d.get("kind") in WORKLOAD_KINDS
    }
    for _, document in documents:  # KEDA makes the HPA of a ScaledObject (keda.sh/v1alpha1)
        if document.get("kind") == "ScaledObject" and serving.is_scaled_by(_keda_target(document)):
            serving.keda = document
    hpas = [(source, d) for source, d in documents if d.get("kind") == "HorizontalPodAutoscaler"]
    for source, document in sorted(hpas, key=lambda item: serving.is_scaled_by(item[1])):  # one that scales it last
        serving.hpa, serving.hpa_source = document, source
    return serving


def _serving_workloads(
    source: str, document: dict[str, Any], documents: list[tuple[str, dict[str, Any]]], vllm_version: str
) -> list[ServingWorkload]:
    """The workload document's vLLM container (at most one: several in one pod are an error), read with the
    ConfigMaps and Secrets of its namespace among `documents`."""
    placed = (document.get("metadata") or {}).get("namespace")
    stores = config_data(documents, None if placed is None else str(placed))
    spec = document.get("spec") or {}
    if document["kind"] == "LeaderWorkerSet":
        template = ((spec.get("leaderWorkerTemplate") or {}).get("leaderTemplate")) or (
            (spec.get("leaderWorkerTemplate") or {}).get("workerTemplate")
        )
        size = int((spec.get("leaderWorkerTemplate") or {}).get("size", 1))
    else:
        template, size = spec.get("template"), 1
    pod_spec = (template or {}).get("spec") or {}
    found = []
    for _, container, words in vllm_containers(source, pod_spec, stores):
        name = str((document.get("metadata") or {}).get("name", ""))
        read = _read_container(container, words, stores, vllm_version, f"{document['kind']}/{name}", source)
        found.append(
            ServingWorkload(
                source,
                str(document["kind"]),
                name,
                int(spec.get("replicas", 1)),
                size,
                container,
                pod_spec,
                read.model,
                read.engine,
                read.pipeline_parallel,
                read.not_modelled,
                command_findings=read.findings,
                port=listening_port(words),
            )
        )
    return found


def _read_container(
    container: dict[str, Any], words: list[str], stores: ConfigData, vllm_version: str, where: str, source: str
) -> VllmCommand:
    """The vLLM container's command line and environment read (vllm_command.py), with an error for each env key
    its ConfigMaps and Secrets lack."""
    listed = container.get("env")
    env = listed if isinstance(listed, list) else []
    origin, image = f"{source} container {container.get('name', '')}", str(container.get("image") or "")
    values = literal_env(container, stores)  # as the kubelet builds it: ConfigMaps, Secrets, order
    undefined = frozenset() if container_words_are_shell(container) else undefined_references(words, container, stores)
    read = read_vllm_container(words, env, vllm_version, where, origin, image, values, undefined)
    read.findings += [
        CommandFinding(
            "error",
            f"{where}: env {missing}: the kubelet does not start the container (CreateContainerConfigError)",
            "add the key, or mark the reference optional: true",
        )
        for missing in missing_keys(container, stores)
    ]
    return read


def _keda_target(scaled_object: dict[str, Any]) -> dict[str, Any]:
    """A ScaledObject's target in an HPA's shape (its scaleTargetRef's kind defaults to Deployment)."""
    ref = (scaled_object.get("spec") or {}).get("scaleTargetRef") or {}
    return {"spec": {"scaleTargetRef": {"kind": ref.get("kind", "Deployment"), "name": ref.get("name")}}}
