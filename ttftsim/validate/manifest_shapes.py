"""The shape of what `ttftsim validate` reads from Kubernetes manifests, checked before any of it is used: a
field of the wrong type anywhere in a Deployment, StatefulSet, LeaderWorkerSet, HPA, probe, volume or
container is one error naming the file and the field's path (`spec.template.spec.containers.0.resources...`),
never an exception in the middle of a check. Only the fields the checks read are declared; everything else in
an object is left alone (extra fields allowed). Types are strict, as the API server's are: `replicas: "2"` is
an error, not 2. Counts of pods are held to the pods limit (ttftsim/inputs/limits.py)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from ttftsim.config.loading import validation_error
from ttftsim.errors import InputError
from ttftsim.inputs.limits import current_limits

Scalar = StrictStr | StrictInt | StrictFloat | StrictBool  # strings in Kubernetes; numbers tolerated (str()-ed)
Count = Annotated[StrictInt, Field(ge=0)]
GpuQuantity = Annotated[StrictInt, Field(ge=0)] | Annotated[StrictStr, Field(pattern=r"^\s*\d+\s*$")]


class _Object(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, frozen=True)


class Metadata(_Object):
    name: StrictStr = ""


class Probe(_Object):
    initialDelaySeconds: Count = 0  # noqa: N815 (Kubernetes' names)
    periodSeconds: Annotated[StrictInt, Field(ge=1)] = 10  # noqa: N815
    failureThreshold: Annotated[StrictInt, Field(ge=1)] = 3  # noqa: N815


class ResourceList(_Object):
    gpus: GpuQuantity | None = Field(default=None, alias="nvidia.com/gpu")
    amd_gpus: GpuQuantity | None = Field(default=None, alias="amd.com/gpu")


class Resources(_Object):
    limits: ResourceList | None = None
    requests: ResourceList | None = None


class VolumeMount(_Object):
    mountPath: StrictStr | None = None  # noqa: N815


class Container(_Object):
    name: StrictStr | None = None
    image: StrictStr | None = None
    command: StrictStr | list[Scalar] | None = None
    args: StrictStr | list[Scalar] | None = None
    resources: Resources | None = None
    volumeMounts: list[VolumeMount] | None = None  # noqa: N815
    startupProbe: Probe | None = None  # noqa: N815
    livenessProbe: Probe | None = None  # noqa: N815
    readinessProbe: Probe | None = None  # noqa: N815


class MatchExpression(_Object):
    key: StrictStr | None = None
    operator: StrictStr | None = None
    values: list[Scalar] | None = None


class SelectorTerm(_Object):
    matchExpressions: list[MatchExpression] | None = None  # noqa: N815


class RequiredTerms(_Object):
    nodeSelectorTerms: list[SelectorTerm] | None = None  # noqa: N815


class NodeAffinity(_Object):
    requiredDuringSchedulingIgnoredDuringExecution: RequiredTerms | None = None  # noqa: N815


class Affinity(_Object):
    nodeAffinity: NodeAffinity | None = None  # noqa: N815
    podAntiAffinity: dict[StrictStr, Any] | None = None  # noqa: N815


class PodSpec(_Object):
    containers: list[Container] | None = None
    nodeSelector: dict[StrictStr, Scalar] | None = None  # noqa: N815
    affinity: Affinity | None = None
    topologySpreadConstraints: list[dict[StrictStr, Any]] | None = None  # noqa: N815
    volumes: list[dict[StrictStr, Any]] | None = None


class PodTemplate(_Object):
    spec: PodSpec | None = None


class WorkloadSpec(_Object):
    replicas: Count = 1
    template: PodTemplate | None = None


class LeaderWorkerTemplate(_Object):
    size: Annotated[StrictInt, Field(ge=1)] = 1
    leaderTemplate: PodTemplate | None = None  # noqa: N815
    workerTemplate: PodTemplate | None = None  # noqa: N815


class LeaderWorkerSetSpec(_Object):
    replicas: Count = 1
    leaderWorkerTemplate: LeaderWorkerTemplate | None = None  # noqa: N815


class ScaleTargetRef(_Object):
    kind: StrictStr | None = None
    name: StrictStr | None = None


class HpaMetric(_Object):
    type: StrictStr | None = None


class ScalingRules(_Object):
    stabilizationWindowSeconds: Count = 300  # noqa: N815


class Behavior(_Object):
    scaleUp: ScalingRules | None = None  # noqa: N815
    scaleDown: ScalingRules | None = None  # noqa: N815


class HpaSpec(_Object):
    scaleTargetRef: ScaleTargetRef | None = None  # noqa: N815
    minReplicas: Count = 1  # noqa: N815
    maxReplicas: Count | None = None  # noqa: N815
    metrics: list[HpaMetric] | None = None
    behavior: Behavior | None = None


class Document(_Object):
    kind: StrictStr
    metadata: Metadata = Metadata()
    spec: dict[StrictStr, Any] | None = None


class ListDocument(Document):
    items: list[dict[StrictStr, Any]] | None = None


SPECS: dict[str, type[_Object]] = {
    "Deployment": WorkloadSpec,
    "StatefulSet": WorkloadSpec,
    "LeaderWorkerSet": LeaderWorkerSetSpec,
    "HorizontalPodAutoscaler": HpaSpec,
}


def check_document(document: dict[str, Any], source: str) -> None:
    """The fields ttftsim reads from one Kubernetes object have the types Kubernetes gives them."""
    try:
        (ListDocument if document.get("kind") == "List" else Document).model_validate(document)
    except ValidationError as exc:
        raise validation_error(source, exc) from None
    spec = SPECS.get(str(document.get("kind")))
    if spec is None:
        return
    try:
        checked = spec.model_validate(document.get("spec") or {})
    except ValidationError as exc:
        error = validation_error(source, exc)
        raise InputError(source, f"spec.{error.field}", error.message) from None
    _check_counts(checked, source)


def check_part(shape: type[_Object], value: Any, source: str, path: str) -> None:
    """A part of a pod as a custom resource writes it (a KServe predictor's model or its pod fields), checked as
    `shape` (Container, PodSpec) before a controller's workload is made of it: an error names the field where the
    file has it (under `path`, e.g. spec.predictor.model), not where the workload made of it would."""
    try:
        shape.model_validate(value)
    except ValidationError as exc:
        error = validation_error(source, exc)
        raise InputError(source, f"{path}.{error.field}" if error.field else path, error.message) from None


def _check_counts(spec: _Object, source: str) -> None:
    limits = current_limits()
    counts = {"replicas": getattr(spec, "replicas", None), "minReplicas": getattr(spec, "minReplicas", None)}
    template = getattr(spec, "leaderWorkerTemplate", None)
    counts["leaderWorkerTemplate.size"] = template.size if template is not None else None
    for field, value in counts.items():
        if value is not None and value > limits.pods:
            message = f"{value:,} pods is beyond the limit of {limits.pods:,} ({limits.how_to_raise('pods')})"
            raise InputError(source, f"spec.{field}", message)
