"""validate's schema check (ttftsim/validate/k8s_schema.py, crd_schemas.py): each object against the Kubernetes
schema of the oldest and newest supported release, custom resources against their vendored CRD schemas; one
line per finding naming file, kind/name and field; kinds the deployment checks cannot read named instead of
"no Deployment"; AMD GPUs counted as a GPU request."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.test_cli import run
from ttftsim.validate.crd_schemas import CRD_FOLDER, strict, vendor, vendored_kinds, without_descriptions
from ttftsim.validate.k8s_schema import (
    KUBERNETES_VERSIONS,
    SchemaFinding,
    builtin_validator,
    check_objects,
    unsupported_findings,
)
from ttftsim.validate.run import validate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "validate"


def _objects(text: str, source: str = "m.yaml") -> list[tuple[str, dict[str, Any]]]:
    return [(f"{source}#{i}", d) for i, d in enumerate(yaml.safe_load_all(text)) if d is not None]


def _example_deployment() -> dict[str, Any]:
    document: dict[str, Any] = next(yaml.safe_load_all((EXAMPLE / "k8s.yaml").read_text()))
    return document


def test_the_examples_objects_pass() -> None:
    assert check_objects(_objects((EXAMPLE / "k8s.yaml").read_text())) == []


def test_an_unknown_field_is_one_error_naming_file_object_and_field() -> None:
    deployment = _example_deployment()
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocl"] = "TCP"
    assert check_objects([("k8s.yaml#0", deployment)]) == [
        SchemaFinding(
            "error",
            "k8s-schema",
            "k8s.yaml#0 Deployment/chat-8b: spec.template.spec.containers.0.ports.0: Additional properties are not "
            "allowed ('protocl' was unexpected) (Kubernetes 1.29-1.37)",
        )
    ]


def test_a_wrong_type_names_the_field() -> None:
    deployment = _example_deployment()
    deployment["spec"]["template"]["spec"]["containers"][0]["startupProbe"]["periodSeconds"] = "10"
    (finding,) = check_objects([("k8s.yaml#0", deployment)])
    assert finding.message == (
        "k8s.yaml#0 Deployment/chat-8b: spec.template.spec.containers.0.startupProbe.periodSeconds: "
        "'10' is not of type 'integer', 'null' (Kubernetes 1.29-1.37)"
    )


def test_a_field_newer_than_the_oldest_release_is_a_warning_naming_it() -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "llm"},
        "spec": {"trafficDistribution": "PreferClose", "ports": [{"port": 8000}]},  # Kubernetes 1.30+
    }
    assert check_objects([("s.yaml#0", service)]) == [
        SchemaFinding(
            "warning",
            "k8s-schema",
            "s.yaml#0 Service/llm: spec: Additional properties are not allowed ('trafficDistribution' was "
            "unexpected) in Kubernetes 1.29 (valid in the other supported releases)",
        )
    ]


QUANTITY_HINT = "is not a Kubernetes quantity (a number with a suffix such as Gi, Mi, G or m: 64Gi, 500m)"


@pytest.mark.parametrize("memory", ["64Gb", "64 Gi", "64gi", "1.2.3Gi", "Gi"])
def test_a_memory_size_kubectl_refuses_is_an_error_naming_the_field(memory: str) -> None:
    # kubectl apply: "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    # (ParseQuantity refuses a lower-case binary suffix and a "b" for bytes)
    deployment = _example_deployment()
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = memory
    assert check_objects([("k8s.yaml#0", deployment)]) == [
        SchemaFinding(
            "error",
            "k8s-schema",
            f"k8s.yaml#0 Deployment/chat-8b: spec.template.spec.containers.0.resources.limits.memory: '{memory}' "
            f"{QUANTITY_HINT} (Kubernetes 1.29-1.37)",
        )
    ]


@pytest.mark.parametrize("memory", ["64Gi", "68719476736", 68719476736, "64G", "1.5Ti", "+.5Ki", "1e9", "500m"])
def test_every_quantity_the_api_server_parses_passes(memory: str | int) -> None:
    deployment = _example_deployment()
    resources = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["limits"]["memory"] = resources["requests"]["memory"] = memory  # a request may not exceed its limit
    assert check_objects([("k8s.yaml#0", deployment)]) == []


def test_a_quantity_in_a_leader_worker_set_gets_the_same_message() -> None:
    container = {"name": "vllm", "image": "vllm/vllm-openai", "resources": {"limits": {"memory": "64Gb"}}}
    template = {"spec": {"containers": [container]}}
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "big"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": template}},
    }
    (finding,) = check_objects([("l.yaml#0", lws)])
    assert finding.message == (
        "l.yaml#0 LeaderWorkerSet/big: spec.leaderWorkerTemplate.workerTemplate.spec.containers.0.resources.limits."
        f"memory: '64Gb' {QUANTITY_HINT}"
    )


def test_a_kind_without_a_schema_is_said_not_checked() -> None:
    monitor = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": {"name": "vllm"}}
    (finding,) = check_objects([("m.yaml#2", monitor)])
    assert (finding.severity, finding.message) == (
        "info",
        "m.yaml#2 PodMonitor/vllm: no schema for monitoring.coreos.com/v1 PodMonitor (Kubernetes 1.29-1.37 or the "
        "vendored CRDs); not checked",
    )


@pytest.mark.parametrize(("api_version", "served"), [("apps/v2", "apps/v1"), ("extensions/v1beta1", "apps/v1")])
def test_a_built_in_kind_under_an_api_version_that_does_not_serve_it_is_an_error(api_version: str, served: str) -> None:
    """apps/v2 never existed, extensions/v1beta1 Deployments went in 1.16: kubectl apply refuses both ("no matches
    for kind"); the finding names the apiVersion that serves the kind."""
    deployment = _example_deployment() | {"apiVersion": api_version}
    (finding,) = check_objects([("k8s.yaml#0", deployment)])
    assert finding.severity == "error" and finding.fix == f"set apiVersion: {served}"
    assert f"apiVersion {api_version} does not serve Deployment in Kubernetes 1.29-1.37 (it is served as {served})" in (
        finding.message
    )


def test_a_custom_resource_named_like_a_built_in_kind_stays_unchecked() -> None:
    """Knative's Service (what KServe's serverless mode deploys) is not a core v1 Service."""
    knative = {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "vllm"}}
    (finding,) = check_objects([("k.yaml#0", knative)])
    assert finding.severity == "info" and "no schema for serving.knative.dev/v1 Service" in finding.message


@pytest.mark.parametrize("api_version", [None, ["v1"]])
def test_a_missing_or_malformed_api_version_is_a_finding(api_version: Any) -> None:
    document = {"kind": "Service", "metadata": {"name": "x"}, "apiVersion": api_version}
    (finding,) = check_objects([("m.yaml#0", document)])
    assert finding.severity == "error" and finding.message.startswith("m.yaml#0 Service/x: apiVersion: ")


def test_custom_resources_go_through_their_crd_schemas() -> None:
    pool = {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": "llm"},
        "spec": {"selector": {"matchLabels": {"app": "llm"}}, "targetPorts": [{"number": "8000"}]},
    }
    (finding,) = check_objects([("p.yaml#0", pool)])
    assert finding.message == "p.yaml#0 InferencePool/llm: spec.targetPorts.0.number: '8000' is not of type 'integer'"
    pool["spec"]["targetPorts"] = [{"number": 8000}]
    assert check_objects([("p.yaml#0", pool)]) == []
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "big"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {}, "leaderTemplat": {}}},
    }
    (finding,) = check_objects([("l.yaml#0", lws)])
    assert finding.message == (
        "l.yaml#0 LeaderWorkerSet/big: spec.leaderWorkerTemplate: Additional properties are not allowed "
        "('leaderTemplat' was unexpected)"
    )


def test_kserve_and_helm_values_are_named_as_unsupported() -> None:
    kserve = _objects((EXAMPLE / "kserve.yaml").read_text(), "kserve.yaml")
    assert check_objects(kserve) == []  # valid against KServe's CRD schema
    assert [f.message for f in unsupported_findings(kserve)] == [
        "kserve.yaml#0: KServe InferenceService/llama-8b is not supported: the deployment checks read a "
        "Deployment, StatefulSet or LeaderWorkerSet with a vLLM container"
    ]
    values = [("values.yaml#0", {"servingEngineSpec": {"modelSpec": []}}), ("v2.yaml#0", {"modelArtifacts": {}})]
    assert [f.message for f in unsupported_findings(values)] == [
        "values.yaml#0: Helm values of vLLM production-stack (servingEngineSpec), not Kubernetes objects",
        "v2.yaml#0: Helm values of llm-d ModelService (modelArtifacts), not Kubernetes objects",
    ]


def test_validate_reads_a_kserve_service_as_its_predictor_deployment() -> None:
    result = run("validate", str(EXAMPLE / "deploy-kserve.yaml"), "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert [(f["severity"], f["check"]) for f in report["findings"]] == [
        ("info", "format"),  # read as the Deployment KServe makes
        ("info", "format"),
        ("error", "gpu-affinity"),  # no GPU label and no hardware in the deployment file
        ("warning", "vllm-version"),  # KServe's huggingfaceserver image: its tag is not a vLLM release
    ]
    assert report["deployment"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert report["deployment"]["engine"] == {"max_model_len": 8192}
    assert report["prediction"] is None


def test_validate_on_helm_values_without_a_workload_names_the_chart(tmp_path: Path) -> None:
    (tmp_path / "k8s.yaml").write_text(
        "servingEngineSpec:\n  modelSpec:\n  - name: llama\n    raySpec: {enabled: true}\n"
    )
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text((EXAMPLE / "deploy.yaml").read_text())
    report = validate(deploy, [])
    assert [(f.check, f.message) for f in report.findings] == [
        (
            "format",
            f"{tmp_path / 'k8s.yaml'}#0: modelSpec llama: a KubeRay cluster (raySpec) is not read; "
            "validate the rendered chart",
        ),
        (
            "unsupported-kind",
            f"{tmp_path / 'k8s.yaml'}#0: Helm values of vLLM production-stack (servingEngineSpec), "
            "not Kubernetes objects",
        ),
    ]
    assert report.findings[1].fix.startswith("render the chart first (helm template")


def test_schema_errors_come_first_and_the_deployment_checks_still_run(tmp_path: Path) -> None:
    text = (
        (EXAMPLE / "k8s.yaml")
        .read_text()
        .replace("ports: [{containerPort: 8000}]", "ports: [{containerPort: 8000, hostPortt: 1}]")
    )
    (tmp_path / "k8s.yaml").write_text(text)
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text((EXAMPLE / "deploy.yaml").read_text())
    report = validate(deploy, [])
    assert report.findings[0].check == "k8s-schema" and "'hostPortt' was unexpected" in report.findings[0].message
    assert not report.passed
    assert report.prediction is not None  # the shape checks passed, so the rest of validate ran


AMD_NODES = "{key: beta.amd.com/gpu.product-name, operator: In, values: [AMD_Instinct_MI300X_OAM]}"


def test_amd_gpus_are_a_gpu_request(tmp_path: Path) -> None:
    text = (EXAMPLE / "k8s.yaml").read_text().replace("nvidia.com/gpu: 1", "amd.com/gpu: 1")
    text = text.replace("{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}", AMD_NODES)
    assert text.count("amd.com/gpu: 1") == 2 and AMD_NODES in text
    (tmp_path / "k8s.yaml").write_text(text)
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text((EXAMPLE / "deploy.yaml").read_text())
    report = validate(deploy, [])
    assert not [f for f in report.findings if f.check in ("gpu-request", "tp-vs-gpus", "k8s-schema")]


def test_strict_refuses_unknown_fields_except_where_the_crd_preserves_them() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"properties": {"type": "string"}}},
            "free": {"type": "object", "properties": {"a": {}}, "x-kubernetes-preserve-unknown-fields": True},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    }
    assert strict(schema) == {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {"properties": {"type": "string"}},  # a field named "properties" is a field
                "additionalProperties": False,
            },
            "free": {"type": "object", "properties": {"a": {}}, "x-kubernetes-preserve-unknown-fields": True},
            "map": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "additionalProperties": False,
    }


def test_vendoring_drops_description_texts_only_and_is_deterministic() -> None:
    schema = {
        "description": "an object",
        "type": "object",
        "properties": {"description": {"type": "string", "description": "a field named description"}},
    }
    assert without_descriptions(schema) == {"type": "object", "properties": {"description": {"type": "string"}}}
    crd = {
        "spec": {
            "group": "example.com",
            "names": {"kind": "Thing"},
            "versions": [
                {"name": "v1", "served": True, "schema": {"openAPIV3Schema": schema}},
                {"name": "v0", "served": False, "schema": {"openAPIV3Schema": schema}},
            ],
        }
    }
    files = vendor(crd)
    assert list(files) == [CRD_FOLDER / "example.com_v1_Thing.json.gz"]
    assert files == vendor(crd)  # no timestamp in the gzip header
    assert json.loads(gzip.decompress(files[CRD_FOLDER / "example.com_v1_Thing.json.gz"])) == without_descriptions(
        schema
    )


def test_the_vendored_kinds() -> None:
    assert vendored_kinds() == [
        "gateway.networking.k8s.io/v1 Gateway",
        "gateway.networking.k8s.io/v1 HTTPRoute",
        "gateway.networking.k8s.io/v1beta1 Gateway",
        "gateway.networking.k8s.io/v1beta1 HTTPRoute",
        "inference.networking.k8s.io/v1 InferencePool",
        "inference.networking.x-k8s.io/v1alpha2 InferenceModel",
        "inference.networking.x-k8s.io/v1alpha2 InferenceObjective",
        "inference.networking.x-k8s.io/v1alpha2 InferencePool",
        "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet",
        "serving.kserve.io/v1alpha1 ClusterServingRuntime",
        "serving.kserve.io/v1alpha1 LLMInferenceService",
        "serving.kserve.io/v1alpha1 ServingRuntime",
        "serving.kserve.io/v1alpha2 LLMInferenceService",
        "serving.kserve.io/v1beta1 InferenceService",
    ]


@pytest.mark.parametrize("version", ["1.29", "1.37"])
def test_the_cached_lookup_gives_kubernetes_validates_own_answer(version: str) -> None:
    """builtin_validator reads kubernetes-validate's files once; its verdicts are the library's own."""
    deployment = _example_deployment()
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocl"] = "TCP"
    hpa = yaml.safe_load_all((EXAMPLE / "k8s.yaml").read_text())
    documents = [
        deployment,
        *list(hpa)[1:],
        {"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": "x"}]}},
    ]
    for document in documents:
        ours = builtin_validator(version, document["apiVersion"], document["kind"])
        assert ours is not None
        mine = jsonschema.exceptions.best_match(ours.iter_errors(document))
        try:
            kubernetes_validate.validate(document, version, strict=True)
            theirs = None
        except kubernetes_validate.ValidationError as exc:
            theirs = exc.message
        assert (None if mine is None else mine.message) == theirs
    assert builtin_validator(version, "serving.kserve.io/v1beta1", "InferenceService") is None


def test_every_supported_release_is_bundled() -> None:
    for version in KUBERNETES_VERSIONS:
        assert builtin_validator(version, "apps/v1", "Deployment") is not None, version
    assert (KUBERNETES_VERSIONS[0], KUBERNETES_VERSIONS[-1]) == ("1.29", "1.37")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (("ports", [{"containerPort": 99999}]), "containers.0.ports.0.containerPort: 99999 is not a port (1-65535)"),
        (("ports", [{"containerPort": 0}]), "containers.0.ports.0.containerPort: 0 is not a port (1-65535)"),
        (("resources", {"requests": {"cpu": "-8"}}), "containers.0.resources.requests.cpu: -8 is negative"),
        (
            ("resources", {"requests": {"memory": "128Gi"}, "limits": {"memory": "64Gi"}}),
            "containers.0.resources.requests.memory: 128Gi must be less than or equal to the memory limit of 64Gi",
        ),
        (  # units compared by value: 1.5 CPUs against 1,400 millicores
            ("resources", {"requests": {"cpu": "1.5", "memory": "1G"}, "limits": {"cpu": "1400m", "memory": "1Gi"}}),
            "containers.0.resources.requests.cpu: 1.5 must be less than or equal to the cpu limit of 1400m",
        ),
    ],
)
def test_what_the_api_server_refuses_beyond_the_schema_is_an_error(change: tuple[str, Any], said: str) -> None:
    deployment = _example_deployment()
    deployment["spec"]["template"]["spec"]["containers"][0][change[0]] = change[1]
    (finding,) = check_objects([("k8s.yaml#0", deployment)])
    assert finding.severity == "error" and f"spec.template.spec.{said}" in finding.message


def test_quantities_are_read_as_the_api_server_parses_them() -> None:
    from fractions import Fraction

    from ttftsim.validate.api_server_rules import quantity_value

    assert quantity_value("64Gi") == 64 * 2**30 and quantity_value("1G") == 10**9 < quantity_value("1Gi")
    assert quantity_value("500m") == Fraction(1, 2) and quantity_value(".5Ki") == 512 and quantity_value(8) == 8
    assert quantity_value("1e3") == 1000 and quantity_value("1E") == 10**18  # exponent, then the exa suffix
    assert quantity_value("12x") is None and quantity_value("") is None and quantity_value(None) is None


def test_a_kind_a_built_in_group_does_not_serve_is_an_error_with_the_nearest_kind() -> None:
    # apiextensions refuses a CRD group without a dot: `apps/v1 Deploymnet` can only be a typo
    from ttftsim.validate.k8s_schema import _check_one

    (finding,) = _check_one("k8s.yaml#0", {"apiVersion": "apps/v1", "kind": "Deploymnet", "metadata": {"name": "m"}})
    assert finding.severity == "error" and "apps/v1 has no kind Deploymnet" in finding.message
    assert "(did you mean Deployment?)" in finding.message and finding.fix == "set kind: Deployment"
    # a custom resource's group keeps the info finding (its CRD may be installed), and kubectl's List wrapper too
    (other,) = _check_one("k8s.yaml#0", {"apiVersion": "example.com/v1", "kind": "Deploymnet"})
    assert other.severity == "info"
    assert all(f.severity != "error" for f in _check_one("k8s.yaml#0", {"apiVersion": "v1", "kind": "List"}))
