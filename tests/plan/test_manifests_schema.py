"""Every manifest set `ttftsim plan` can write passes the Kubernetes schemas offline: built-in kinds with
kubernetes-validate (strict: unknown fields refused) for every supported release, custom resources
(LeaderWorkerSet, InferencePool, HTTPRoute, KServe InferenceService) against their vendored CRD schemas, the
production-stack values against the chart's values.schema.json (tests/data/crds/, made strict); and
`ttftsim validate` reads the manifests without an error or a placement warning. The checkers are seen to
refuse a broken object of each custom kind, so that passing means something."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.plan.test_manifests import BASE, make_candidate, make_plan
from ttftsim.plan.manifests import write_deployment
from ttftsim.validate.crd_schemas import crd_schema, strict
from ttftsim.validate.k8s_schema import KUBERNETES_VERSIONS, check_objects
from ttftsim.validate.run import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "crds"
TRAFFIC = """traffic:
  type: synthetic
  arrivals: {type: poisson, rate: 6}
  prompt_tokens: {type: lognormal, mean: 1000, std: 800, high: 6000}
  output_tokens: {type: lognormal, mean: 200, std: 150, high: 1000}
  num_requests: 300
slo: {ttft_p99_s: 2.0}
"""
# (plan model, manifest options, TP, router, quantization): every branch of the generator
SETS = {
    "tp1-prefix-fp8": ("Llama-3.1-8B", {}, 1, "prefix_aware", "fp8"),
    "tp2-round-robin-node-cache": ("Llama-3.1-8B", {"weights": "node_cache"}, 2, "round_robin", None),
    "tp1-session-fixed": ("Llama-3.1-8B", {"autoscale": False, "storage_class": "nfs"}, 1, "session_affinity", None),
    "tp16-lws-least-loaded": ("Llama-3.1-70B", {"hf_token_secret": "creds"}, 16, "least_outstanding", None),
    "tp8-pp2-lws-kv-aware": ("Llama-3.1-70B", {}, 8, "kv_aware", None),  # the plan's engine sets PP 2
}
MODEL_IDS = {"Llama-3.1-8B": "meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-70B": "meta-llama/Llama-3.1-70B-Instruct"}


def _write(folder: Path, name: str) -> list[str]:
    model, options, tp, router, quantization = SETS[name]
    plan = make_plan(model, **options)
    if name.startswith("tp8-pp2"):
        plan = plan.model_copy(update={"engine": plan.engine.model_copy(update={"pipeline_parallel_size": 2})})
    cand = make_candidate(tp=tp, router=router, quantization=quantization)
    return write_deployment(folder, plan, cand, 2, 16e9, MODEL_IDS[model], BASE)


def _documents(folder: Path, files: list[str]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name in files:
        if name in ("manifests.yaml", "storage.yaml", "kserve-inferenceservice.yaml"):
            for index, document in enumerate(yaml.safe_load_all((folder / name).read_text())):
                out.append((f"{name}#{index}", document))
    return out


@pytest.fixture(scope="module", params=sorted(SETS))
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, list[str]]:
    folder = tmp_path_factory.mktemp(request.param)
    return request.param, folder, _write(folder, request.param)


def test_built_in_kinds_pass_every_supported_kubernetes_release(written: tuple[str, Path, list[str]]) -> None:
    _, folder, files = written
    checked = 0
    for _, document in _documents(folder, files):
        if crd_schema(document["apiVersion"], document["kind"]) is not None:
            continue
        for version in KUBERNETES_VERSIONS:
            assert kubernetes_validate.validate(document, version, strict=True) == version
        checked += 1
    assert checked >= 3  # workload or PVC/Job, Service, HPA at least


def test_every_object_passes_validates_schema_check(written: tuple[str, Path, list[str]]) -> None:
    _, folder, files = written
    documents = _documents(folder, files)
    assert check_objects(documents) == []
    kinds = {d["kind"] for _, d in documents}
    name = written[0]
    multi_node = name.startswith(("tp16", "tp8-pp2"))
    assert ("LeaderWorkerSet" in kinds) == multi_node
    assert ("InferencePool" in kinds and "HTTPRoute" in kinds) == (
        SETS[name][3] in ("prefix_aware", "least_outstanding", "kv_aware")
    )
    assert ("InferenceService" in kinds) == (not multi_node)


def test_production_stack_values_pass_the_charts_schema(written: tuple[str, Path, list[str]]) -> None:
    name, folder, files = written
    if name.startswith(("tp16", "tp8-pp2")):
        assert "production-stack-values.yaml" not in files
        return
    schema = strict(json.loads((DATA / "production-stack-values.schema.json").read_text()))
    values = yaml.safe_load((folder / "production-stack-values.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(values)


def test_ttftsim_validate_reads_the_set_without_errors_or_placement_warnings(
    written: tuple[str, Path, list[str]],
) -> None:
    name, folder, _ = written
    deploy = folder / "deploy.yaml"
    deploy.write_text(f"name: {name}\nmanifests: [manifests.yaml]\n{TRAFFIC}")
    report = validate(deploy, [])
    errors = [f for f in report.findings if f.severity == "error"]
    assert errors == []
    checks = {f.check for f in report.findings if f.severity == "warning"}
    assert not checks & {"k8s-schema", "anti-affinity", "shared-memory", "requests-limits", "probes", "hpa"}
    assert report.deployment["replicas"] == 2


@pytest.mark.parametrize("alternative", ["kserve-inferenceservice.yaml", "production-stack-values.yaml"])
def test_ttftsim_validate_reads_each_alternative_without_errors(
    written: tuple[str, Path, list[str]], alternative: str
) -> None:
    """The KServe InferenceService and the production-stack values pin the planned GPU as manifests.yaml does (the
    InferenceService had no node affinity: validate failed it, gpu-affinity)."""
    name, folder, files = written
    if alternative not in files:
        pytest.skip(f"{name} writes no {alternative} (a multi-node replica or AMD GPUs)")
    deploy = folder / f"deploy-{alternative}"
    deploy.write_text(f"name: {name}\nmanifests: [{alternative}]\n{TRAFFIC}")
    report = validate(deploy, [])
    assert [f for f in report.findings if f.severity == "error"] == []
    assert not [f for f in report.findings if f.check == "gpu-affinity"]


BROKEN = [
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", {"spec": {"leaderWorkerTemplate": {"size": "2"}}}, "size"),
    (
        "inference.networking.k8s.io/v1",
        "InferencePool",
        {"spec": {"selector": {"matchLabels": {"app": "x"}}, "targetPorts": [{"number": 8000}]}, "extra": 1},
        "extra",
    ),
    (
        "inference.networking.k8s.io/v1",
        "InferencePool",
        {"spec": {"selector": {"matchLabels": {"app": "x"}}, "targetPorts": [{"number": 70000}]}},
        "70000",
    ),
    ("gateway.networking.k8s.io/v1", "HTTPRoute", {"spec": {"rules": [{"backendRef": []}]}}, "backendRef"),
    ("serving.kserve.io/v1beta1", "InferenceService", {"spec": {"predictor": {"modle": {}}}}, "modle"),
]


@pytest.mark.parametrize(("api_version", "kind", "body", "named"), BROKEN)
def test_the_crd_schemas_refuse_a_broken_object(api_version: str, kind: str, body: dict[str, Any], named: str) -> None:
    schema = crd_schema(api_version, kind)
    assert schema is not None
    document = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, **body}
    with pytest.raises(jsonschema.ValidationError, match=named):
        jsonschema.Draft202012Validator(schema).validate(document)


def test_an_amd_winner_requests_amd_gpus_runs_the_rocm_image_and_passes(tmp_path: Path) -> None:
    plan = make_plan("Llama-3.1-8B")
    cand = make_candidate(tp=1, router="round_robin", hardware="MI300X-192GB")
    files = write_deployment(tmp_path, plan, cand, 2, 16e9, MODEL_IDS["Llama-3.1-8B"], BASE)
    assert "kserve-inferenceservice.yaml" not in files  # KServe's Hugging Face runtime is a CUDA build
    documents = _documents(tmp_path, files)
    assert check_objects(documents) == []
    deployment = next(d for _, d in documents if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "vllm/vllm-openai-rocm:v0.15.1"
    assert container["resources"]["limits"] == {"amd.com/gpu": 1, "memory": "64Gi"}
    assert pod["tolerations"] == [{"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [
        {"key": "amd.com/gpu.product-name", "operator": "In", "values": ["AMD_Instinct_MI300X_OAM"]}
    ]
    (tmp_path / "deploy.yaml").write_text(f"name: amd\nmanifests: [manifests.yaml]\n{TRAFFIC}")
    report = validate(tmp_path / "deploy.yaml", [])
    assert [f for f in report.findings if f.severity == "error"] == []
    assert report.deployment["hardware"] == "MI300X-192GB"
