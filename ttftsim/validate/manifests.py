"""Read what `ttftsim validate` needs from real Kubernetes manifests: the serving workload (Deployment,
StatefulSet or LeaderWorkerSet), its vLLM container and `vllm serve` arguments, resources, placement
rules, probes, volumes, and the HPA that scales it. Which node labels name a GPU, and which values mean
which GPU, is the hardware profiles' (hwprofiles/*.yaml node_labels), never a table here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ttftsim.config.engine import EngineArgs
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import node_label_keys
from ttftsim.inputs.files import read_text
from ttftsim.inputs.structured import parse_yaml_documents
from ttftsim.validate.container_command import container_words, container_words_are_shell
from ttftsim.validate.container_env import ConfigData, config_data, literal_env, missing_keys
from ttftsim.validate.manifest_shapes import check_document
from ttftsim.validate.vllm_args import API_SERVER_MODULE, vllm_arguments
from ttftsim.validate.vllm_checks import upstream_vllm_image
from ttftsim.validate.vllm_command import read_vllm_container
from ttftsim.validate.vllm_invocation import CommandFinding

WORKLOAD_KINDS = ("Deployment", "StatefulSet", "LeaderWorkerSet")
DEFAULT_VLLM = str(EngineArgs.model_fields["vllm_version"].default)
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")  # the device plugins' extended resource names


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
        for _, container, words in _vllm_containers(source, pod_spec, stores):
            name = str((document.get("metadata") or {}).get("name", ""))
            where = f"{document['kind']}/{name}"
            listed = container.get("env")
            env = listed if isinstance(listed, list) else []
            origin, image = f"{source} container {container.get('name', '')}", str(container.get("image") or "")
            values = literal_env(container, stores)  # as the kubelet builds it: ConfigMaps, Secrets, order
            read = read_vllm_container(words, env, vllm_version, where, origin, image, values)
            read.findings += [
                CommandFinding(
                    "error",
                    f"{where}: env {missing}: the kubelet does not start the container (CreateContainerConfigError)",
                    "add the key, or mark the reference optional: true",
                )
                for missing in missing_keys(container, stores)
            ]
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
                    port=_listening_port(words),
                )
            )
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


def _vllm_containers(
    source: str, pod_spec: dict[str, Any], stores: ConfigData
) -> list[tuple[int, dict[str, Any], list[str]]]:
    """The pod's vLLM server container (index, container, the words it runs): one whose command runs vLLM, else
    one that leaves the command to a vLLM image's entrypoint (see _runs_vllm). Several in one pod are an error
    naming them."""
    found = []
    for index, container in enumerate(pod_spec.get("containers") or []):
        _check_lists(source, index, container)
        try:
            words = container_words(container, stores)
        except ValueError as exc:  # shlex: an unbalanced quote
            name = container.get("name", index) if isinstance(container, dict) else index
            message = f"cannot split the command and args of container {name!r} as its shell would ({exc})"
            raise InputError(source, f"containers.{index}.command", message) from None
        if _runs_vllm(container, words):
            _check_one_argument_each(source, index, container)
            found.append((index, container, words))
        elif not container_words_are_shell(container):
            _check_no_command_line_in_one_item(source, index, container)
    if len(found) > 1:
        names = ", ".join(f"{c.get('name', i)} ({c.get('image', '')})" for i, c, _ in found)
        raise InputError(
            source,
            f"containers.{found[1][0]}",
            f"{len(found)} containers of one pod run a vLLM server ({names}); validate checks one per deploy file",
        )
    return found


def _listening_port(words: list[str]) -> int | None:
    """The port a `vllm serve` (or API-server module) command line listens on: its last --port, else vLLM's 8000;
    None for an image's entrypoint (its wrapper may choose) or a port that is not a number."""
    if not _explicit_vllm(words):
        return None
    port: str | None = "8000"
    arguments = (vllm_arguments(words) or ([], True))[0]
    for index, word in enumerate(arguments):
        if word == "--port":
            port = arguments[index + 1] if index + 1 < len(arguments) else None
        elif word.startswith("--port="):
            port = word.split("=", 1)[1]
    return int(port) if port is not None and port.isdigit() else None


def _keda_target(scaled_object: dict[str, Any]) -> dict[str, Any]:
    """A ScaledObject's target in an HPA's shape (its scaleTargetRef's kind defaults to Deployment)."""
    ref = (scaled_object.get("spec") or {}).get("scaleTargetRef") or {}
    return {"spec": {"scaleTargetRef": {"kind": ref.get("kind", "Deployment"), "name": ref.get("name")}}}


def _check_lists(source: str, index: int, container: dict[str, Any]) -> None:
    """command and args as Kubernetes takes them: lists of strings (the API server refuses a string)."""
    for part in ("command", "args"):
        value = container.get(part)
        if value is not None and not isinstance(value, list):
            raise InputError(
                source,
                f"containers.{index}.{part}",
                f"must be a list of strings, one argument each, got {type(value).__name__} (Kubernetes does not split "
                "a string)",
            )


FLAG_INSIDE = re.compile(r"\s--?[A-Za-z]")


def _check_one_argument_each(source: str, index: int, container: dict[str, Any]) -> None:
    """An item of a vLLM container's command line holding several flags (`"M --max-model-len 8192 -tp 2"`) reaches
    vLLM as one argument (no shell splits it): refused, naming the item. A shell wrapper's script is one word."""
    if container_words_are_shell(container):
        return
    for part in ("command", "args"):
        for item_index, item in enumerate(container.get(part) or []):
            text = str(item).strip()
            if not text.startswith(("{", "[")) and FLAG_INSIDE.search(text):
                raise InputError(
                    source,
                    f"containers.{index}.{part}.{item_index}",
                    f"{text!r} holds several words: Kubernetes passes it to vLLM as one argument; write one flag or "
                    "value per item",
                )


def _check_no_command_line_in_one_item(source: str, index: int, container: dict[str, Any]) -> None:
    """A whole `vllm serve ...` line in one item of command or args (no shell to split it): Kubernetes runs a
    program of that whole name, which does not exist. Refused naming the item, as when the args hold it."""
    for part in ("command", "args"):
        for item_index, item in enumerate(container.get(part) or []):
            text = str(item).strip()
            if _explicit_vllm(text.split()) and len(text.split()) > 1:
                raise InputError(
                    source,
                    f"containers.{index}.{part}.{item_index}",
                    f"{text!r} holds several words: Kubernetes runs it as one program name (no shell splits it); "
                    "write one word per item, or run it with [sh, -c, ...]",
                )


def _runs_vllm(container: dict[str, Any], words: list[str]) -> bool:
    """The container runs a vLLM server: its command runs `vllm serve` or the OpenAI API-server module; or it sets no
    command, so that its image's entrypoint runs with its args, and the image is vLLM's own or a GPU container's
    whose name holds vllm (vendor builds: RHOAI's vllm-cuda-rhel9). A sidecar or a router whose image name holds
    "vllm" (lmcache/vllm_router, a metrics exporter) requests no GPU and is not one."""
    if _explicit_vllm(words):
        return True
    return not container.get("command") and _entrypoint_image(container)


def runs_vllm_server(container: Any) -> bool:
    """Whether a container (of any pod) runs a vLLM server, as _runs_vllm decides; a command that cannot be split
    runs none."""
    if not isinstance(container, dict):
        return False
    try:
        return _runs_vllm(container, container_words(container))
    except ValueError:  # shlex: an unbalanced quote
        return False


def _explicit_vllm(words: list[str]) -> bool:
    return (
        any(word == "serve" and i > 0 and words[i - 1].rsplit("/", 1)[-1] == "vllm" for i, word in enumerate(words))
        or API_SERVER_MODULE in words
    )


def _entrypoint_image(container: dict[str, Any]) -> bool:
    """No program of its own, and an image whose entrypoint is vLLM's server (see _runs_vllm)."""
    image = str(container.get("image") or "")
    if upstream_vllm_image(image):
        return True
    limits = ((container.get("resources") or {}).get("limits")) or {}
    requests = ((container.get("resources") or {}).get("requests")) or {}
    return "vllm" in image.lower() and any(name in limits or name in requests for name in GPU_RESOURCES)
