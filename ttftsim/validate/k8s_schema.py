"""Every object `ttftsim validate` reads, checked against the Kubernetes schema before the deployment checks.

Built-in kinds go through `kubernetes-validate` (its strict JSON schemas, generated from each release's
OpenAPI document: an unknown field is an error, as `kubectl apply`'s default strict field validation makes
it; ttftsim/validate/builtin_schemas.py), for the oldest and the newest Kubernetes release ttftsim supports
(KUBERNETES_VERSIONS): a field that only a newer release knows is said as such. Custom resources
(LeaderWorkerSet, InferencePool, HTTPRoute, KServe InferenceService) go through their published CRD schemas
(ttftsim/validate/crd_schemas.py). Each object gives at most one finding per release, on one line: file and
document, kind/name, field path, what is wrong; then one for each rule the API server adds beyond the schemas
(ttftsim/validate/api_server_rules.py).

Kinds the deployment checks cannot read (KServe, llm-d, Helm chart values) are named here, so that a set of
manifests without a Deployment, StatefulSet or LeaderWorkerSet says what it holds instead of only "no
Deployment". Not checked: CEL rules of CRDs, admission webhooks, anything the cluster's state decides
(quotas, existing Secrets and claims).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import jsonschema

from ttftsim.validate.api_server_rules import api_server_rules
from ttftsim.validate.builtin_schemas import CHECKED_VERSIONS, QUANTITY_PATTERN, builtin_validator, served_versions
from ttftsim.validate.builtin_schemas import KUBERNETES_VERSIONS as KUBERNETES_VERSIONS  # named from here too
from ttftsim.validate.crd_schemas import crd_schema
from ttftsim.validate.manifests import WORKLOAD_KINDS
from ttftsim.validate.selector_rules import selector_rules
from ttftsim.validate.serving_container import runs_vllm_server
from ttftsim.validate.unread_forms import CONFIG_FIX, ENTRYPOINT_FIX, is_kserve_config, other_entrypoint
from ttftsim.validate.vllm_args import API_SERVER_MODULE

MAX_VALUE_CHARS = 60
# Kinds people deploy vLLM with that the deployment checks do not read: what to tell them
UNSUPPORTED_KINDS = {
    "serving.kserve.io InferenceService": "KServe InferenceService",
    "serving.kserve.io LLMInferenceService": "KServe LLMInferenceService",
    "serving.kserve.io ServingRuntime": "KServe ServingRuntime",
    "serving.kserve.io ClusterServingRuntime": "KServe ClusterServingRuntime",
    "llm-d.ai ModelService": "llm-d ModelService",
    "serving.kserve.io InferenceGraph": "KServe InferenceGraph",
    "ray.io RayService": "KubeRay RayService",
    "ray.io RayCluster": "KubeRay RayCluster",
    "nvidia.com DynamoGraphDeployment": "NVIDIA Dynamo DynamoGraphDeployment",
    "workloads.x-k8s.io RoleBasedGroup": "RoleBasedGroup",
}
# kinds a vLLM deployment's files hold, for "did you mean" (apiextensions refuses a CRD group without a dot)
COMMON_KINDS = (
    "Deployment",
    "StatefulSet",
    "DaemonSet",
    "ReplicaSet",
    "Pod",
    "Service",
    "ConfigMap",
    "Secret",
    "Job",
    "CronJob",
    "HorizontalPodAutoscaler",
    "PodDisruptionBudget",
    "PersistentVolumeClaim",
    "ServiceAccount",
    "Namespace",
)
HELM_VALUES = {  # a top-level key of a chart's values.yaml -> the chart
    "servingEngineSpec": "Helm values of vLLM production-stack (servingEngineSpec)",
    "modelArtifacts": "Helm values of llm-d ModelService (modelArtifacts)",
}


@dataclass(frozen=True)
class SchemaFinding:
    """One finding of the schema check, in the shape of validate's findings."""

    severity: str
    check: str
    message: str
    fix: str = ""


def check_objects(documents: list[tuple[str, dict[str, Any]]]) -> list[SchemaFinding]:
    """Each document checked against its schema: errors, kinds without a schema, documents that are not
    Kubernetes objects. The documents are (source, object) as validate's manifest reader gives them."""
    findings: list[SchemaFinding] = []
    for source, document in documents:
        if "kind" not in document:
            message = f"{source}: {not_an_object(document)}; skipped"
            findings.append(SchemaFinding("warning", NOT_AN_OBJECT, message, HELM_FIX))
            continue
        findings += _check_one(source, document)
        where = f"{source} {document.get('kind')}/{_name(document)}"
        findings += [
            SchemaFinding("error", "k8s-schema", f"{where}: {problem}")
            for problem in api_server_rules(document) + selector_rules(document)
        ]
    return findings


NOT_AN_OBJECT = "not-an-object"
HELM_FIX = "render the chart first (helm template RELEASE CHART -f values.yaml > rendered.yaml) and validate that"


def not_an_object(document: dict[str, Any]) -> str:
    """What a YAML document without kind is: a chart's values, or unknown."""
    for key, what in HELM_VALUES.items():
        if key in document:
            return f"{what}, not Kubernetes objects"
    return "not a Kubernetes object (no apiVersion or kind; Helm chart values?)"


class UnsupportedDeploymentError(Exception):
    """No workload the deployment checks can read, and the files deploy a model in another form: the
    findings that say so (with the schema check's)."""

    def __init__(self, findings: list[SchemaFinding]) -> None:
        super().__init__("; ".join(f.message for f in findings))
        self.findings = findings


def unsupported_deployment(
    documents: list[tuple[str, dict[str, Any]]], schema_findings: list[SchemaFinding]
) -> UnsupportedDeploymentError | None:
    """When the documents hold no workload the checks read: the error naming each document that deploys a
    model in another form (with the schema check's findings on the rest), None when there is none."""
    named = unsupported_findings(documents)
    if not named:
        return None
    return UnsupportedDeploymentError([f for f in schema_findings if f.check != NOT_AN_OBJECT] + named)


def unsupported_findings(documents: list[tuple[str, dict[str, Any]]]) -> list[SchemaFinding]:
    """One error per document that deploys a model in a form the deployment checks cannot read."""
    findings = []
    for source, document in documents:
        if "kind" not in document:
            message = f"{source}: {not_an_object(document)}"
            findings.append(SchemaFinding("error", "unsupported-kind", message, HELM_FIX))
            continue
        findings += _unread_form(source, document)
        known = UNSUPPORTED_KINDS.get(f"{_group(document)} {document.get('kind')}") or _other_vllm_pods(document)
        if known is not None:
            message = (
                f"{source}: {known}/{_name(document)} is not supported: the deployment checks read a Deployment, "
                "StatefulSet or LeaderWorkerSet with a vLLM container"
            )
            findings.append(SchemaFinding("error", "unsupported-kind", message, KIND_FIX))
    return findings


def _unread_form(source: str, document: dict[str, Any]) -> list[SchemaFinding]:
    """A workload running another vLLM entrypoint, or a KServe LLMInferenceServiceConfig alone (unread_forms.py)."""
    where = f"{source}: {document.get('kind')}/{_name(document)}"
    if (runs := other_entrypoint(document)) is not None:
        message = f"{where}: {runs}, which validate does not read (it reads `vllm serve` or {API_SERVER_MODULE})"
        return [SchemaFinding("error", "unsupported-kind", message, ENTRYPOINT_FIX)]
    if is_kserve_config(document):
        message = f"{where}: a template an LLMInferenceService merges in (spec.baseRefs), with no pods of its own"
        return [SchemaFinding("error", "unsupported-kind", message, CONFIG_FIX)]
    return []


def _other_vllm_pods(document: dict[str, Any]) -> str | None:
    """The kind of a document of another kind whose pods run a vLLM server (an Argo Rollout, a DaemonSet, a Job, a
    CronJob, a bare Pod, ...: a container that runs `vllm serve`, or a vLLM image's entrypoint, as the deployment
    checks decide); None for any other (a Job that runs `vllm bench serve` against the service is a client)."""
    if document.get("kind") in WORKLOAD_KINDS:
        return None
    spec = _mapping(document, "spec")
    if "jobTemplate" in spec:  # a CronJob: its Jobs' spec
        spec = _mapping(_mapping(spec, "jobTemplate"), "spec")
    pod = _mapping(_mapping(spec, "template"), "spec") if "template" in spec else spec  # a bare Pod: its own spec
    containers = pod.get("containers")
    if isinstance(containers, list) and any(runs_vllm_server(container) for container in containers):
        return str(document.get("kind"))
    return None


def misplaced_vllm(document: dict[str, Any]) -> bool:
    """A workload whose vLLM server container sits under its `spec` itself, not its pod template's: the schema
    refuses the field and Kubernetes never runs it."""
    containers = _mapping(document, "spec").get("containers")
    return (
        document.get("kind") in WORKLOAD_KINDS
        and isinstance(containers, list)
        and any(isinstance(c, dict) and runs_vllm_server(c) for c in containers)
    )


def _mapping(document: dict[str, Any], key: str) -> dict[str, Any]:
    value = document.get(key)
    return value if isinstance(value, dict) else {}


KIND_FIX = "validate the Deployment the controller creates (kubectl get deployment -o yaml), or its vLLM arguments"


def _check_one(source: str, document: dict[str, Any]) -> list[SchemaFinding]:
    where = f"{source} {document.get('kind')}/{_name(document)}"
    api_version, kind = document.get("apiVersion"), str(document.get("kind"))
    if not isinstance(api_version, str) or not api_version:
        problem = "missing" if api_version is None else "not a group/version string"
        return [SchemaFinding("error", "k8s-schema", f"{where}: apiVersion: {problem}", "set apiVersion")]
    custom = crd_schema(api_version, kind)
    if custom is not None:
        error = _first_error(custom, document)
        return [] if error is None else [SchemaFinding("error", "k8s-schema", f"{where}: {error}")]
    failures: list[tuple[str, str]] = []
    for version in CHECKED_VERSIONS:
        validator = builtin_validator(version, api_version, kind)
        if validator is None:
            failures.append((version, ""))
            continue
        best = jsonschema.exceptions.best_match(validator.iter_errors(document))
        if best is not None:
            failures.append((version, _describe(best)))
    if all(message == "" for _, message in failures) and len(failures) == len(CHECKED_VERSIONS):
        return _no_schema(where, api_version, kind)
    if len(failures) == len(CHECKED_VERSIONS):  # wrong in every release: each distinct message once
        messages = dict.fromkeys(message or "this apiVersion and kind are not served" for _, message in failures)
        return [SchemaFinding("error", "k8s-schema", f"{where}: {m} (Kubernetes {_range()})") for m in messages]
    return [
        SchemaFinding(
            "warning",
            "k8s-schema",
            f"{where}: {message or 'this apiVersion and kind are not served'} in Kubernetes {version} "
            "(valid in the other supported releases)",
        )
        for version, message in failures
    ]


def _no_schema(where: str, api_version: str, kind: str) -> list[SchemaFinding]:
    """No checked release and no vendored CRD has a schema for the apiVersion and kind: an error where the API
    server would refuse it (a built-in kind under a group that does not serve it, a kind a built-in group lacks),
    else an info line (a custom resource of a CRD ttftsim does not vendor)."""
    served = served_versions(kind) if _built_in_group(api_version) else []
    if served:  # a built-in kind under an apiVersion no release serves it as: the API server refuses it
        return [
            SchemaFinding(
                "error",
                "k8s-schema",
                f"{where}: apiVersion {api_version} does not serve {kind} in Kubernetes {_range()} (it is served "
                f"as {', '.join(served)}): kubectl apply refuses it without a CRD of that group and kind",
                f"set apiVersion: {served[-1]}",
            )
        ]
    # core, apps, batch, ...: no CRD can add a kind there (a List is kubectl's wrapper, not a served kind)
    if "." not in api_version.rpartition("/")[0] and not kind.endswith("List"):
        near = difflib.get_close_matches(kind, COMMON_KINDS, n=1)
        hint = f" (did you mean {near[0]}?)" if near else ""
        return [
            SchemaFinding(
                "error",
                "k8s-schema",
                f"{where}: {api_version} has no kind {kind} in Kubernetes {_range()}{hint}: kubectl apply "
                "refuses it (a custom resource's group has a dot, so none can add kinds to this one)",
                f"set kind: {near[0]}" if near else "",
            )
        ]
    return [
        SchemaFinding(
            "info",
            "k8s-schema",
            f"{where}: no schema for {api_version} {kind} (Kubernetes {_range()} or the vendored CRDs); not checked",
        )
    ]


def _built_in_group(api_version: str) -> bool:
    """Kubernetes' own API groups: the core group (v1), those without a dot (apps, batch, autoscaling, policy,
    extensions) and *.k8s.io; any other is a custom resource's (Knative's serving.knative.dev/v1 Service, Volcano's
    batch.volcano.sh Job), which a kind name shared with a built-in one does not make wrong."""
    group = api_version.rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def _first_error(schema: dict[str, Any], document: dict[str, Any]) -> str | None:
    """The most relevant schema error (jsonschema's best_match), described; None when the object passes."""
    validator = jsonschema.Draft202012Validator(schema)
    best = jsonschema.exceptions.best_match(validator.iter_errors(document))
    return None if best is None else _describe(best)


def _describe(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(part) for part in error.absolute_path) or "(object)"
    if error.validator == "pattern" and error.validator_value == QUANTITY_PATTERN:
        value = _short(repr(error.instance))
        return (
            f"{path}: {value} is not a Kubernetes quantity (a number with a suffix such as Gi, Mi, G or m: 64Gi, 500m)"
        )
    return f"{path}: {_short(error.message)}"


def _short(text: str) -> str:
    """jsonschema's message with a long echoed value cut short, on one line."""
    text = " ".join(text.split())
    if len(text) <= 2 * MAX_VALUE_CHARS + 40:
        return text
    return text[:MAX_VALUE_CHARS] + " ... " + text[-MAX_VALUE_CHARS:]


def _range() -> str:
    return f"{CHECKED_VERSIONS[0]}-{CHECKED_VERSIONS[-1]}"


def _group(document: dict[str, Any]) -> str:
    return str(document.get("apiVersion", "")).split("/")[0]


def _name(document: dict[str, Any]) -> str:
    metadata = document.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""
