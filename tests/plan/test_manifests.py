"""The winner's deployable output (ttftsim/plan/k8s/): what each manifest holds, with known answers worked
by hand (storage from the checkpoint's bytes, GPUs per pod, the router object, online quantization), and the
files and README that `write_deployment` leaves. Schema validity of every set is tests/plan/test_manifests_schema.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ttftsim.config.plan import Plan
from ttftsim.plan.evaluate import Candidate
from ttftsim.plan.k8s.alternatives import kserve_inference_service, production_stack_values
from ttftsim.plan.k8s.objects import adapter_values, manifest_objects, storage
from ttftsim.plan.k8s.spec import Deployable, deployable, dns_name, pods_per_replica
from ttftsim.plan.manifests import write_deployment

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "plans" / "quickstart.yaml"
BASE = QUICKSTART.parent
MODEL_IDS = {"Llama-3.1-8B": "meta-llama/Llama-3.1-8B-Instruct", "Llama-3.1-70B": "meta-llama/Llama-3.1-70B-Instruct"}


def make_plan(model: str = "Llama-3.1-8B", **manifests: Any) -> Plan:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["model"] = model
    data["manifests"] = manifests
    return Plan.model_validate(data)


def make_candidate(
    tp: int = 1, router: str = "least_outstanding", quantization: str | None = None, hardware: str = "H100-SXM5-80GB"
) -> Candidate:
    return Candidate(hardware, tp, None, None, True, True, quantization, "auto", router, 0)


def make_spec(plan: Plan | None = None, cand: Candidate | None = None, replicas: int = 3) -> Deployable:
    plan = plan or make_plan()
    model_id = MODEL_IDS.get(plan.model, plan.model)
    return deployable(plan, cand or make_candidate(), replicas, 16e9, model_id, BASE)


def by_kind(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objects}


def test_storage_is_the_checkpoint_in_its_native_dtype_with_a_fifth_more() -> None:
    # Llama-3.1-8B: 8,030,261,248 parameters x 2 bytes (bf16) = 16,060,522,496 B; x 1.2 / 2^30 = 17.95 -> 18 GiB
    spec = make_spec()
    assert spec.checkpoint_bytes == 16_060_522_496
    assert spec.storage_gib == 18
    claim, job = storage(spec)
    assert claim["spec"] == {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "18Gi"}}}
    assert job["spec"]["template"]["spec"]["volumes"] == [
        {"name": "weights", "persistentVolumeClaim": {"claimName": "quickstart-weights"}}
    ]
    # Llama-3.1-70B: 70,553,706,496 x 2 = 141,107,412,992 B; x 1.2 / 2^30 = 157.7 -> 158 GiB, whatever fp8 does
    big = make_spec(make_plan("Llama-3.1-70B"), make_candidate(tp=4, quantization="fp8"))
    assert (big.checkpoint_bytes, big.storage_gib) == (141_107_412_992, 158)


def test_host_memory_holds_the_pods_share_of_the_checkpoint_and_shm() -> None:
    assert make_spec().memory_gib == 64  # 18 GiB of share + 2 GiB of shm: the 64 GiB floor
    # Llama-3.1-70B TP4 in one pod: 158 GiB (141.1 GB x 1.2) + 16 GiB of shm = 174 GiB
    big = make_spec(make_plan("Llama-3.1-70B"), make_candidate(tp=4))
    limits = by_kind(manifest_objects(big))["Deployment"]["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert limits["limits"]["memory"] == limits["requests"]["memory"] == "174Gi"
    # TP16 over two pods: half each, 79 GiB + 16 = 95 GiB
    assert make_spec(make_plan("Llama-3.1-70B"), make_candidate(tp=16)).memory_gib == 95


def test_the_download_job_fetches_safetensors_only_with_the_token_and_pods_read_offline() -> None:
    spec = make_spec()
    job = storage(spec)[1]["spec"]["template"]["spec"]["containers"][0]
    assert job["command"] == [
        "python3",
        "-c",
        "from huggingface_hub import snapshot_download; "
        "snapshot_download('meta-llama/Llama-3.1-8B-Instruct', ignore_patterns=['original/*', '*.pth'])",
    ]
    token = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
    assert job["env"] == [token, {"name": "HF_HOME", "value": "/models/hf"}]
    pod = by_kind(manifest_objects(spec))["Deployment"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["env"] == [
        token,
        {"name": "HF_HOME", "value": "/models/hf"},
        {"name": "HF_HUB_OFFLINE", "value": "1"},
    ]


def test_secret_name_and_key_come_from_the_plan_file() -> None:
    spec = make_spec(make_plan(hf_token_secret="llm-creds", hf_token_key="hf"))
    env = by_kind(manifest_objects(spec))["Deployment"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[0] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "llm-creds", "key": "hf"}}}
    isvc = kserve_inference_service(spec)
    assert isvc is not None
    assert isvc["spec"]["predictor"]["model"]["env"][0]["valueFrom"]["secretKeyRef"] == {
        "name": "llm-creds",
        "key": "hf",
    }


def test_node_cache_requests_ephemeral_storage_sized_from_the_weights_and_writes_no_claim() -> None:
    spec = make_spec(make_plan(weights="node_cache"))
    assert storage(spec) == []
    pod = by_kind(manifest_objects(spec))["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["requests"]["ephemeral-storage"] == "18Gi"
    assert pod["volumes"][1] == {
        "name": "weights",
        "hostPath": {"path": "/var/lib/hf-cache", "type": "DirectoryOrCreate"},
    }
    assert [e["name"] for e in container["env"]] == ["HF_TOKEN", "HF_HOME"]  # the node's first pod downloads


def test_single_node_replica_is_a_deployment_with_shm_spread_and_the_startup_budget() -> None:
    objects = by_kind(manifest_objects(make_spec(cand=make_candidate(tp=2))))
    deployment = objects["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 2, "memory": "64Gi"}
    assert pod["volumes"][0] == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert pod["topologySpreadConstraints"][0]["whenUnsatisfiable"] == "ScheduleAnyway"  # one zone planned
    # 16 GB of weights on a bare node: 244.9 s predicted with margin -> 25 periods of 10 s
    assert container["startupProbe"]["failureThreshold"] == 25
    assert objects["HorizontalPodAutoscaler"]["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 300}}


def test_a_tp_group_wider_than_a_node_is_a_leader_worker_set_joined_by_ray() -> None:
    spec = make_spec(make_plan("Llama-3.1-70B"), make_candidate(tp=16), replicas=2)
    assert (spec.pods_per_replica, spec.gpus_per_pod) == (2, 8)  # H100 nodes hold 8 GPUs
    objects = by_kind(manifest_objects(spec))
    lws = objects["LeaderWorkerSet"]["spec"]
    assert lws["replicas"] == 2 and lws["leaderWorkerTemplate"]["size"] == 2
    leader = lws["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    worker = lws["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert leader["command"][:2] == ["sh", "-c"]
    assert leader["command"][2].startswith(
        "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh leader "
        "--ray_cluster_size=$(LWS_GROUP_SIZE); "
        "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 16 "
    )
    assert worker["command"][2] == (
        "bash /vllm-workspace/examples/online_serving/multi-node-serving.sh worker --ray_address=$(LWS_LEADER_ADDRESS)"
    )
    assert "startupProbe" in leader and "startupProbe" not in worker
    worker_annotations = lws["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"]
    assert "prometheus.io/scrape" not in worker_annotations  # workers serve no API and no /metrics
    assert objects["Service"]["spec"]["selector"] == {
        "app": "quickstart",
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    assert objects["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]["kind"] == "LeaderWorkerSet"
    assert production_stack_values(spec) is None and kserve_inference_service(spec) is None


@pytest.mark.parametrize(
    ("router", "kinds", "affinity"),
    [
        ("round_robin", ["Deployment", "Service", "HorizontalPodAutoscaler"], None),
        ("session_affinity", ["Deployment", "Service", "HorizontalPodAutoscaler"], "ClientIP"),
        ("least_outstanding", ["Deployment", "Service", "InferencePool", "HTTPRoute", "HorizontalPodAutoscaler"], None),
        ("prefix_aware", ["Deployment", "Service", "InferencePool", "HTTPRoute", "HorizontalPodAutoscaler"], None),
    ],
)
def test_the_router_object_matches_the_planned_router(router: str, kinds: list[str], affinity: str | None) -> None:
    objects = manifest_objects(make_spec(make_plan(gateway="edge"), make_candidate(router=router)))
    assert [o["kind"] for o in objects] == kinds
    assert by_kind(objects)["Service"]["spec"].get("sessionAffinity") == affinity


def test_inference_pool_and_route_as_the_gie_chart_renders_them() -> None:
    objects = by_kind(manifest_objects(make_spec(make_plan(gateway="edge"), make_candidate(router="prefix_aware"))))
    assert objects["InferencePool"] == {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": "quickstart"},
        "spec": {
            "selector": {"matchLabels": {"app": "quickstart"}},
            "targetPorts": [{"number": 8000}],
            "endpointPickerRef": {"name": "quickstart-epp", "port": {"number": 9002}, "failureMode": "FailOpen"},
        },
    }
    rule = objects["HTTPRoute"]["spec"]["rules"][0]
    assert objects["HTTPRoute"]["spec"]["parentRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"}
    ]
    assert rule["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "quickstart"}
    ]


def test_online_fp8_is_flagged_and_a_native_fp8_checkpoint_is_not() -> None:
    spec = make_spec(cand=make_candidate(quantization="fp8"))
    assert spec.vllm_command[-2:] == ("--quantization", "fp8")
    template = by_kind(manifest_objects(spec))["Deployment"]["spec"]["template"]
    assert template["metadata"]["annotations"]["ttftsim/quantization"] == (
        "online fp8: --quantization fp8 on the 16-bit checkpoint meta-llama/Llama-3.1-8B-Instruct, "
        "weights quantized while they load"
    )
    native = make_spec(make_plan("nvidia/Llama-3.1-8B-Instruct-FP8"), make_candidate(quantization="fp8"))
    assert "--quantization" not in native.vllm_command and native.online_quantization is None
    assert native.storage_gib == 11  # 9,081,200,640 B (fp8 linears, 16-bit embeddings) x 1.2 / 2^30 = 10.15


def test_int4_needs_a_prequantized_checkpoint_and_says_so() -> None:
    spec = make_spec(cand=make_candidate(quantization="int4"))
    assert spec.vllm_command[-2:] == ("--quantization", "awq") and spec.prequantized == "int4"
    template = by_kind(manifest_objects(spec))["Deployment"]["spec"]["template"]
    assert "pre-quantized checkpoint" in template["metadata"]["annotations"]["ttftsim/quantization"]


def test_no_autoscaling_is_a_fixed_fleet(tmp_path: Path) -> None:
    spec = make_spec(make_plan(autoscale=False))
    assert [o["kind"] for o in manifest_objects(spec)] == ["Deployment", "Service", "InferencePool", "HTTPRoute"]
    files = write_deployment(tmp_path, make_plan(autoscale=False), make_candidate(), 3, 16e9, "m/x", BASE)
    assert "prometheus-adapter-values.yaml" not in files


def test_adapter_rule_serves_the_hpa_metric_per_pod() -> None:
    rule = adapter_values()["rules"]["custom"][0]
    assert rule["name"] == {"matches": "^vllm:num_requests_waiting$", "as": "vllm_num_requests_waiting"}
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
    hpa = by_kind(manifest_objects(make_spec()))["HorizontalPodAutoscaler"]["spec"]
    assert hpa["metrics"][0]["pods"]["metric"]["name"] == "vllm_num_requests_waiting"
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 6)


def test_production_stack_values_carry_the_engine_flags_in_the_charts_fields() -> None:
    spec = make_spec(cand=make_candidate(tp=2, router="prefix_aware", quantization="fp8"))
    values = production_stack_values(spec)
    assert values is not None
    model = values["servingEngineSpec"]["modelSpec"][0]
    assert model["vllmConfig"] == {
        "tensorParallelSize": 2,
        "maxModelLen": 8192,
        "enablePrefixCaching": True,
        "enableChunkedPrefill": True,
        "extraArgs": ["--quantization", "fp8"],
    }
    assert (model["repository"], model["tag"], model["requestGPU"]) == ("vllm/vllm-openai", "v0.15.1", 2)
    assert model["pvcAccessMode"] == ["ReadWriteMany"]  # one claim mounted by three replicas
    assert values["routerSpec"] == {"routingLogic": "prefixaware"}
    least = production_stack_values(make_spec(cand=make_candidate(router="least_outstanding")))
    assert least is not None and least["routerSpec"] == {"routingLogic": "roundrobin"}


def test_write_deployment_leaves_the_files_and_a_readme_with_the_apply_order(tmp_path: Path) -> None:
    plan = make_plan(hf_token_secret="llm-creds")
    files = write_deployment(tmp_path, plan, make_candidate(router="prefix_aware"), 3, 16e9, "m/x", BASE)
    assert files == [
        "vllm-args.txt",
        "manifests.yaml",
        "storage.yaml",
        "prometheus-adapter-values.yaml",
        "production-stack-values.yaml",
        "kserve-inferenceservice.yaml",
        "README.md",
    ]
    readme = (tmp_path / "README.md").read_text()
    steps = [line for line in readme.splitlines() if line[:1].isdigit()]
    assert [s.split("`")[1].split(" ")[:3] for s in steps] == [
        ["kubectl", "create", "secret"],
        ["kubectl", "apply", "-f"],
        ["helm", "install", "prometheus-adapter"],
        ["helm", "install", "quickstart"],
        ["kubectl", "apply", "-f"],
        ["kubectl", "rollout", "status"],
    ]
    assert "kubectl create secret generic llm-creds --from-literal=token=$HF_TOKEN" in steps[0]
    after = readme.splitlines()[readme.splitlines().index(steps[-1]) + 1 :]
    assert after[0] == "" and after[1].startswith("Send traffic to the Gateway")  # its own paragraph, not step 6's
    assert "storage.yaml" in steps[1] and "manifests.yaml" in steps[4]
    assert "&id" not in (tmp_path / "manifests.yaml").read_text()  # no YAML anchors
    assert "Weights are quantized online" not in readme and "production-stack policy" not in readme


def test_readme_says_what_an_alternative_does_differently_and_flags_online_fp8(tmp_path: Path) -> None:
    write_deployment(tmp_path, make_plan(), make_candidate(quantization="fp8"), 3, 16e9, "m/x", BASE)
    readme = (tmp_path / "README.md").read_text()
    assert "Weights are quantized online: `--quantization fp8` on the 16-bit checkpoint" in readme
    assert "(its router has no least_outstanding policy: routingLogic roundrobin, the nearest it offers)" in readme


@pytest.mark.parametrize(
    ("name", "expected"), [("Quickstart", "quickstart"), ("chat 8B / v2", "chat-8b-v2"), ("__", "llm")]
)
def test_names_are_dns_labels(name: str, expected: str) -> None:
    assert dns_name(name) == expected


def test_every_flag_written_is_one_vllm_serve_takes_in_each_modelled_version() -> None:
    """Against vLLM's own argument lists (ttftsim/validate/data/vllm_args_*.json, extracted from each release)."""
    plan = make_plan().model_copy(
        update={"engine": make_plan().engine.model_copy(update={"gpu_memory_utilization": 0.9})}
    )
    commands = [
        make_spec(plan, Candidate("H100-SXM5-80GB", 2, 64, 4096, False, False, "fp8", "fp8", "round_robin", 0)),
        make_spec(plan, make_candidate(quantization="int4")),
        make_spec(plan, make_candidate(quantization="int8")),
    ]
    written = {word for spec in commands for word in spec.vllm_command if word.startswith("--")}
    assert len(written) == 11
    lists = sorted((ROOT / "ttftsim" / "validate" / "data").glob("vllm_args_*.json"))
    assert len(lists) >= 3
    for path in lists:
        flags = json.loads(path.read_text())["flags"]
        options = {option for flag in flags for option in flag["options"]}
        assert written <= options, (path.name, written - options)
        kv = next(flag for flag in flags if "--kv-cache-dtype" in flag["options"])
        assert kv["choices"] is None or "fp8" in kv["choices"]


def test_a_plan_over_zones_spreads_the_pods_hard_over_them() -> None:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["availability"] = {"zones": 3}
    spec = make_spec(Plan.model_validate(data), replicas=3)
    pod = by_kind(manifest_objects(spec))["Deployment"]["spec"]["template"]["spec"]
    assert pod["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "quickstart"}},
        }
    ]


def test_pipeline_parallelism_from_the_plans_engine_spans_pods_as_the_lws_example_does() -> None:
    data = yaml.safe_load(QUICKSTART.read_text())
    data["model"] = "Llama-3.1-70B"
    data["engine"]["pipeline_parallel_size"] = 2
    spec = make_spec(Plan.model_validate(data), make_candidate(tp=8), replicas=2)
    # TP 8 x PP 2 = 16 GPUs on 8-GPU H100 nodes: 2 pods of 8 (kubernetes-sigs/lws docs/examples/vllm/GPU/lws.yaml)
    assert (spec.pods_per_replica, spec.gpus_per_pod) == (2, 8)
    assert spec.vllm_command[3:7] == ("--tensor-parallel-size", "8", "--pipeline-parallel-size", "2")
    lws = by_kind(manifest_objects(spec))["LeaderWorkerSet"]["spec"]["leaderWorkerTemplate"]
    assert lws["size"] == 2
    assert lws["leaderTemplate"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8


@pytest.mark.parametrize(
    ("world", "per_node", "pods"), [(1, 8, 1), (8, 8, 1), (16, 8, 2), (12, 8, 2), (9, 8, 3), (4, 2, 2)]
)
def test_pods_per_replica_hold_equal_whole_gpu_counts(world: int, per_node: int, pods: int) -> None:
    assert pods_per_replica(world, per_node) == pods
