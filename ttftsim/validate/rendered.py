"""What ttftsim/validate/formats.py's readers make: the workload a KServe controller or a Helm chart creates
from a document, with the notes on how it was read, and the small builders the readers share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ttftsim.validate.k8s_schema import NOT_AN_OBJECT, SchemaFinding
from ttftsim.validate.manifest_shapes import check_document
from ttftsim.validate.yaml_fields import Fields

Documents = list[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class RenderedWorkload:
    """One workload a controller or chart makes from `source`, and what validate says about how it was read."""

    source: str
    document: dict[str, Any] | None  # None: nothing made, only the notes say why
    notes: tuple[SchemaFinding, ...] = ()


@dataclass
class Rendered:
    """The workloads made from the documents, the findings of reading them, and the sources read."""

    documents: Documents = field(default_factory=list)
    findings: list[SchemaFinding] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)

    def add(self, workload: RenderedWorkload) -> None:
        if workload.document is not None:
            check_document(workload.document, workload.source)  # the shapes validate's checks rely on
            self.documents.append((workload.source, workload.document))
        self.findings += workload.notes
        self.sources.add(workload.source)

    def kept(self, schema_findings: list[SchemaFinding]) -> list[SchemaFinding]:
        """The schema check's findings, less 'not an object, skipped' for the values files read here."""
        return [
            f for f in schema_findings if not (f.check == NOT_AN_OBJECT and f.message.split(": ")[0] in self.sources)
        ]


def note(source: str, message: str, severity: str = "info") -> SchemaFinding:
    """How a document was read (info), or what of it is left out (warning)."""
    return SchemaFinding(severity, "format", f"{source}: {message}")


def gpu_resources(name: str, count: int) -> dict[str, Any]:
    """requests and limits of `count` devices of the resource `name` (nvidia.com/gpu, amd.com/gpu)."""
    return {"limits": {name: count}, "requests": {name: count}} if count > 0 else {}


def merge_resources(base: Fields, over: Fields) -> dict[str, Any]:
    """Container resources, `over`'s quantities over `base`'s, requests and limits each merged by name."""
    merged: dict[str, Any] = {}
    for part in dict.fromkeys([*base.data, *over.data]):
        if part in ("limits", "requests"):
            merged[part] = {**base.mapping(part).data, **over.mapping(part).data}
        else:
            merged[part] = over.data.get(part, base.data.get(part))
    return merged


def with_tcp_readiness(container: dict[str, Any], default_port: int) -> dict[str, Any]:
    """The container with the TCP readiness probe a controller defaults (KServe, Knative): on its first declared
    port, else `default_port`, every 10 s, 3 failures; a container with its own probe as it is."""
    if container.get("readinessProbe"):
        return container
    ports = [p for p in container.get("ports") or [] if isinstance(p, dict) and "containerPort" in p]
    port = ports[0]["containerPort"] if ports else default_port
    return container | {"readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 10, "failureThreshold": 3}}


def workload(kind: str, name: str, replicas: int, pod_spec: dict[str, Any], group_size: int = 1) -> dict[str, Any]:
    """A Deployment, or a LeaderWorkerSet of `group_size` pods, running `pod_spec`."""
    template = {"spec": pod_spec}
    if kind == "LeaderWorkerSet":
        spec: dict[str, Any] = {
            "replicas": replicas,
            "leaderWorkerTemplate": {"size": group_size, "leaderTemplate": template, "workerTemplate": template},
        }
        api = "leaderworkerset.x-k8s.io/v1"
    else:
        spec, api = {"replicas": replicas, "template": template}, "apps/v1"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name}, "spec": spec}
