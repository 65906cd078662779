"""`ttftsim validate` on the shipped example and on malformed or inconsistent deployments: each gives a
one-line error (exit 2) or a finding with a fix (exit 1), never a traceback."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.test_cli import _assert_one_line_error, run
from ttftsim.validate.run import validate

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "validate"


def _copy(tmp_path: Path, deploy_edit: tuple[str, str] = ("", ""), k8s_edit: tuple[str, str] = ("", "")) -> Path:
    deploy, k8s = (EXAMPLE / "deploy.yaml").read_text(), (EXAMPLE / "k8s.yaml").read_text()
    for text, (old, _) in ((deploy, deploy_edit), (k8s, k8s_edit)):
        assert old in text, old
    (tmp_path / "k8s.yaml").write_text(k8s.replace(*k8s_edit, 1) if k8s_edit[0] else k8s)
    path = tmp_path / "deploy.yaml"
    path.write_text(deploy.replace(*deploy_edit, 1) if deploy_edit[0] else deploy)
    return path


def test_an_moe_deployment_with_data_and_expert_parallelism_is_read_checked_and_predicted(tmp_path: Path) -> None:
    """Mixtral on 4 GPUs a pod as TP 2 x DP 2 with expert parallelism (`--data-parallel-size 2
    --enable-expert-parallel`): the engine arguments read, the GPU request matched against TP x DP, the KV cache
    reported per engine, the shared-memory warning naming the replica's 4 GPUs, and a prediction."""
    k8s = (EXAMPLE / "k8s.yaml").read_text()
    k8s = k8s.replace("meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mixtral-8x7B-Instruct-v0.1")
    k8s = k8s.replace(
        'args: [--max-model-len, "8192", --max-num-seqs, "128", --enable-prefix-caching]',
        'args: [--max-model-len, "8192", --tensor-parallel-size, "2", --data-parallel-size, "2", '
        "--enable-expert-parallel]",
    )
    (tmp_path / "k8s.yaml").write_text(k8s.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 4"))
    path = tmp_path / "deploy.yaml"
    path.write_text((EXAMPLE / "deploy.yaml").read_text().replace("rate: 12", "rate: 6"))
    result = run("validate", str(path), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    engine = report["deployment"]["engine"]
    assert (engine["tensor_parallel_size"], engine["data_parallel_size"], engine["enable_expert_parallel"]) == (
        2,
        2,
        True,
    )
    messages = [(f["check"], f["message"]) for f in report["findings"]]
    assert not any(check == "tp-vs-gpus" for check, _ in messages)
    assert any(check == "shared-memory" and "4 GPUs a replica (tensor x pipeline x data" in m for check, m in messages)
    assert any(check == "kv-capacity" and "(each of 2 data-parallel engines)" in m for check, m in messages)
    assert report["passed"]


def test_the_example_passes_with_a_prediction() -> None:
    result = run("validate", str(EXAMPLE / "deploy.yaml"), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["passed"] and report["deployment"]["hardware"] == "H100-SXM5-80GB"
    assert report["deployment"]["engine"]["max_num_seqs"] == 128
    assert report["prediction"]["replicas"] == 2 and report["prediction"]["ttft_p99_s"] < 0.5
    assert report["warnings"] == []  # nothing parsed and left unmodelled


INVALID = [
    (("slo:", "slo: [\n"), ("", ""), "not valid YAML"),
    (("name: chat-8b", "name: chat-8b\nregion: eu"), ("", ""), "region"),
    (("ttft_p99_s: 0.5", "ttft_p99_s: fast"), ("", ""), "slo.ttft_p99_s"),
    (("manifests: [k8s.yaml]", "manifests: [nope.yaml]"), ("", ""), "manifest file not found"),
    (("", ""), ("  name: chat-8b\nspec:\n  replicas: 2", "  name: [chat-8b\n"), "not valid YAML"),
    (("", ""), ("apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler", "apiVersion: autoscaling/v2"), "no kind"),
    (
        ("", ""),
        (
            "image: vllm/vllm-openai:v0.15.1\n          command: [vllm, serve,",
            "image: nginx\n          command: [nginx,",
        ),
        "no Deployment",
    ),
    (("", ""), ('--max-num-seqs, "128"', '--max-num-seqs, "lots"'), "--max-num-seqs"),
    (("", ""), ('--max-model-len, "8192"', '--block-size, "7", --max-model-len, "8192"'), "--block-size"),
    (
        ("", ""),
        ("command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]", "command: [vllm, serve]"),
        "no model named",
    ),
    (("traffic:", "traffic_:"), ("", ""), "traffic"),
]


@pytest.mark.parametrize(("deploy_edit", "k8s_edit", "needle"), INVALID)
def test_unreadable_input_is_one_line_exit_2(
    tmp_path: Path, deploy_edit: tuple[str, str], k8s_edit: tuple[str, str], needle: str
) -> None:
    path = _copy(tmp_path, deploy_edit, k8s_edit)
    _assert_one_line_error(run("validate", str(path)), needle)


def test_no_manifests_and_no_engine_is_an_input_error(tmp_path: Path) -> None:
    path = _copy(tmp_path, ("manifests: [k8s.yaml]", "manifests: []"))
    _assert_one_line_error(run("validate", str(path)), str(path), "manifests")


FINDINGS = [
    (("", ""), ("meta-llama/Llama-3.1-8B-Instruct]", "meta-llama/Llama-3.1-70B-Instruct]"), "memory-fit", "141.1 GB"),
    (
        ("", ""),
        ("meta-llama/Llama-3.1-8B-Instruct]", "meta-llama/Llama-3.1-70B-Instruct]"),
        "memory-fit",
        "Deployment/chat-8b (",  # names the workload and its file
    ),
    (("", ""), ('--max-num-seqs, "128"', '--tensor-parallel-size, "3"'), "tp-vs-heads", "32 attention heads"),
    (
        ("", ""),
        (
            'requests: {nvidia.com/gpu: 1, cpu: "8", memory: 64Gi}\n'
            "            limits: {nvidia.com/gpu: 1, memory: 64Gi}",
            'requests: {cpu: "8", memory: 64Gi}',
        ),
        "gpu-request",
        "no nvidia.com/gpu",
    ),
    (("", ""), ('--max-num-seqs, "128"', '--tensor-parallel-size, "2"'), "tp-vs-gpus", "requests 1 x 1"),
    (
        ("", ""),
        ('--max-num-seqs, "128"', '--data-parallel-size, "2"'),
        "tp-vs-gpus",
        "tensor x pipeline x data parallel = 2 GPUs",
    ),
    (
        ("", ""),
        (
            "startupProbe:\n            httpGet: {path: /health, port: 8000}\n"
            "            periodSeconds: 10\n            failureThreshold: 30",
            "livenessProbe:\n            httpGet: {path: /health, port: 8000}\n"
            "            periodSeconds: 10\n            failureThreshold: 3",
        ),
        "probes",
        "CrashLoopBackOff",
    ),
    (
        ("", ""),
        ("kind: Deployment, name: chat-8b}", "kind: Deployment, name: chat-70b}"),
        "hpa",
        "not Deployment/chat-8b",
    ),
    (("rate: 12", "rate: 60"), ("", ""), "slo", "misses the SLO"),
    (("", ""), ("key: nvidia.com/gpu.product", "key: example.com/zone"), "gpu-affinity", "cannot tell which"),
    # a label no profile names: without hardware in the deployment file nothing could be predicted, and a gate
    # that passed would have checked neither memory nor the SLO
    (("", ""), ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBMX"), "gpu-affinity", "SLO go unchecked"),
    # the finding names the target that was missed (TPOT here; TTFT P99 meets its 0.5 s)
    (("ttft_p99_s: 0.5", "ttft_p99_s: 0.5\n  tpot_p99_s: 0.001"), ("", ""), "slo", "P99 TPOT"),
]


@pytest.mark.parametrize(("deploy_edit", "k8s_edit", "check", "needle"), FINDINGS)
def test_inconsistent_deployment_is_a_finding_with_a_fix_exit_1(
    tmp_path: Path, deploy_edit: tuple[str, str], k8s_edit: tuple[str, str], check: str, needle: str
) -> None:
    path = _copy(tmp_path, deploy_edit, k8s_edit)
    result = run("validate", str(path), "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    findings = [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert any(f["check"] == check and needle in f["message"] for f in findings), findings
    assert all(f["fix"] for f in findings)


def test_a_time_sliced_gpu_label_is_predicted_on_its_gpu_with_a_warning(tmp_path: Path) -> None:
    """GPU Feature Discovery appends -SHARED to a time-sliced GPU's product label: the GPU is still known."""
    path = _copy(tmp_path, ("", ""), ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3-SHARED"))
    report = json.loads(run("validate", str(path), "--json").stdout)
    assert report["passed"] and report["deployment"]["hardware"] == "H100-SXM5-80GB" and report["prediction"]
    shared = [f for f in report["findings"] if f["check"] == "gpu-affinity"]
    assert [f["severity"] for f in shared] == ["warning"] and "time-sliced" in shared[0]["message"]


def test_validate_json_is_strict_json_and_names_every_missed_target(tmp_path: Path) -> None:
    """No NaN (json.loads would take it; strict parsers do not): a figure without a value is null."""
    path = _copy(tmp_path, ("ttft_p99_s: 0.5", "ttft_p99_s: 0.001\n  tpot_p99_s: 0.001"))
    result = run("validate", str(path), "--json")

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    report = json.loads(result.stdout, parse_constant=refuse)
    assert report["prediction"]["goodput_share"] is None  # no goodput target: nothing counted
    slo = next(f for f in report["findings"] if f["check"] == "slo")
    assert "P99 TTFT" in slo["message"] and "(target 0.001 s), P99 TPOT" in slo["message"]


def test_a_tpot_target_below_a_lone_requests_decode_step_is_not_sent_to_more_replicas(tmp_path: Path) -> None:
    """1 ms a token is below what one sequence's decode step takes on the GPU: no replica count meets it, and the fix
    says so with that floor, which lies below every predicted TPOT (a lower bound), instead of "more than N
    replicas"."""
    path = _copy(tmp_path, ("ttft_p99_s: 0.5", "ttft_p99_s: 0.5\n  tpot_p99_s: 0.001"))
    report = json.loads(run("validate", str(path), "--json").stdout)
    slo = next(f for f in report["findings"] if f["check"] == "slo")
    assert "more replicas cannot meet it" in slo["fix"] and "P99 TPOT" in slo["fix"]
    floor = float(slo["fix"].split(" waits ")[1].split()[0])
    assert 0.001 < floor <= report["prediction"]["tpot_p50_s"]


def test_slo_miss_suggests_a_replica_count_that_works(tmp_path: Path) -> None:
    path = _copy(tmp_path, ("rate: 12", "rate: 80"))
    report = json.loads(run("validate", str(path), "--json").stdout)
    slo = next(f for f in report["findings"] if f["check"] == "slo")
    assert slo["fix"].startswith("run ") and "replicas" in slo["fix"]
    suggested = int(slo["fix"].split()[1])
    fixed = _copy(tmp_path / "..", ("rate: 12", "rate: 80"), ("minReplicas: 2", f"minReplicas: {suggested}"))
    assert run("validate", str(fixed)).returncode == 0  # the suggestion passes


def test_pipeline_parallelism_is_modelled_and_an_unmodelled_flag_is_a_warning(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    before = json.loads(run("validate", str(path), "--json").stdout)
    k8s = (tmp_path / "k8s.yaml").read_text().replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 2")
    flags = '--pipeline-parallel-size, "2", --speculative-config, "{}", '
    (tmp_path / "k8s.yaml").write_text(k8s.replace("args: [", "args: [" + flags))
    shown = run("validate", str(path))
    assert shown.returncode == 0, shown.stdout + shown.stderr  # TP1 x PP2 = the 2 GPUs requested
    report = json.loads(run("validate", str(path), "--json").stdout)
    assert report["passed"] and report["deployment"]["engine"]["pipeline_parallel_size"] == 2
    assert not any("pipeline" in warning for warning in report["warnings"]) and len(report["warnings"]) == 1
    assert report["prediction"] != before["prediction"]  # two stages of half the layers, not one GPU
    assert report["warnings"][0].startswith("vLLM flag --speculative-config {} (Deployment/chat-8b) is parsed but not")


def test_a_calibration_file_applies_to_a_deployment_read_from_manifests(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    before = json.loads(run("validate", str(path), "--json").stdout)["prediction"]
    document = {"format": "ttftsim-deployment-calibration", "version": 1, "hardware": "H100-SXM5-80GB"}
    (tmp_path / "fit.json").write_text(json.dumps(document | {"factors": {"step_overhead_s": 0.02}}))
    path.write_text(path.read_text() + "calibration: fit.json\n")
    after = json.loads(run("validate", str(path), "--json").stdout)["prediction"]
    assert after["ttft_p50_s"] > before["ttft_p50_s"] + 0.015  # 20 ms more per step, in the first token's step
    (tmp_path / "fit.json").write_text(json.dumps(document | {"hardware": "A100-SXM4-80GB", "factors": {}}))
    refused = run("validate", str(path))  # a finding naming the file and the hardware, not a traceback
    assert refused.returncode == 1 and "fit.json" in refused.stdout and "fitted on A100-SXM4-80GB" in refused.stdout


def test_a_second_vllm_workload_is_an_error_naming_both(tmp_path: Path) -> None:
    """Checking the first and passing would hide the second's problems (here a flag vLLM refuses) from a CI gate,
    whether it sits in the same file or in one passed with --manifest."""
    path = _copy(tmp_path)
    k8s = (tmp_path / "k8s.yaml").read_text()
    canary = k8s.replace("name: chat-8b", "name: chat-8b-canary").replace("--max-num-seqs", "--max-num-sqs")
    (tmp_path / "canary.yaml").write_text(canary)
    both = run("validate", str(path), "--manifest", str(tmp_path / "canary.yaml"))
    _assert_one_line_error(both, "2 workloads with a vLLM container", "Deployment/chat-8b (", "chat-8b-canary")
    (tmp_path / "k8s.yaml").write_text(k8s + "\n---\n" + canary)
    _assert_one_line_error(run("validate", str(path)), "Deployment/chat-8b-canary", "validate checks one deployment")


def test_a_manifest_named_twice_is_read_once(tmp_path: Path) -> None:
    """In manifests: (relative to the deploy file) and again by --manifest (another spelling of the same path)."""
    path = _copy(tmp_path)
    once = run("validate", str(path), "--json")
    twice = run("validate", str(path), "--manifest", str(tmp_path / "." / "k8s.yaml"), "--json")
    assert twice.returncode == once.returncode == 0, twice.stderr
    assert json.loads(twice.stdout)["prediction"] == json.loads(once.stdout)["prediction"]


def test_a_workload_scaled_to_zero_is_an_error_without_a_prediction_not_a_traceback(tmp_path: Path) -> None:
    path = _copy(tmp_path, k8s_edit=("name: chat-8b}\n  minReplicas: 2", "name: other}\n  minReplicas: 2"))
    (tmp_path / "k8s.yaml").write_text((tmp_path / "k8s.yaml").read_text().replace("replicas: 2", "replicas: 0", 1))
    result = run("validate", str(path), "--json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["prediction"] is None
    assert any(f["check"] == "replicas" and "0 replicas and no HPA" in f["message"] for f in report["findings"])


def test_an_hpa_scaling_to_zero_predicts_one_replica_with_a_warning(tmp_path: Path) -> None:
    path = _copy(tmp_path, k8s_edit=("minReplicas: 2", "minReplicas: 0"))
    report = json.loads(run("validate", str(path), "--json").stdout)
    assert report["prediction"]["replicas"] == 1
    assert any(f["severity"] == "warning" and "minReplicas 0" in f["message"] for f in report["findings"])


def test_an_hpa_of_another_workload_does_not_set_the_replicas_predicted(tmp_path: Path) -> None:
    """The Deployment runs 2; another Deployment's HPA (minReplicas 5) is an error and leaves the prediction at 2."""
    path = _copy(tmp_path, k8s_edit=("name: chat-8b}\n  minReplicas: 2", "name: other}\n  minReplicas: 5"))
    report = json.loads(run("validate", str(path), "--json").stdout)
    assert report["prediction"]["replicas"] == 2
    assert any(f["check"] == "hpa" and "scales Deployment/other" in f["message"] for f in report["findings"])


def test_an_hpa_whose_minimum_is_above_its_maximum_is_an_error(tmp_path: Path) -> None:
    path = _copy(tmp_path, k8s_edit=("minReplicas: 2\n  maxReplicas: 6", "minReplicas: 7\n  maxReplicas: 6"))
    result = run("validate", str(path), "--json")
    assert result.returncode == 1
    assert any("minReplicas 7 is above maxReplicas 6" in f["message"] for f in json.loads(result.stdout)["findings"])


WAITING = 'metric: {name: "vllm:num_requests_waiting"}'
POD_METRIC = f'pods:\n        {WAITING}\n        target: {{type: AverageValue, averageValue: "5"}}'
UTILIZATION = "target: {type: Utilization, averageUtilization: 50}"


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        (
            f"pods:\n        {WAITING}\n        {UTILIZATION}",
            [
                "spec.metrics.0.pods.target.averageValue: Pods metrics take a target averageValue (this one: type "
                "Utilization, averageUtilization 50)"
            ],
        ),
        (
            f'pods:\n        {WAITING}\n        target: {{type: Average, averageValue: "0"}}',
            [
                "spec.metrics.0.pods.target.type: 'Average' must be either Utilization, Value, or AverageValue",
                "spec.metrics.0.pods.target.averageValue: 0 must be positive",
            ],
        ),
        (
            "object:\n        describedObject: {apiVersion: v1, kind: Service, name: chat-8b}\n        metric: "
            f"{{name: queue_depth}}\n        {UTILIZATION}",
            [
                "spec.metrics.0.object.target.averageValue: Object metrics take a target averageValue or value (this "
                "one: type Utilization, averageUtilization 50)"
            ],
        ),
        (
            "resource:\n        name: cpu\n        target: {type: Utilization, averageUtilization: 50, "
            "averageValue: 2}",
            [
                "spec.metrics.0.resource.target.averageValue: Resource metrics take a target averageUtilization or "
                "averageValue, not both"
            ],
        ),
    ],
)
def test_an_hpa_metric_target_the_api_server_refuses_is_an_error(
    tmp_path: Path, metric: str, expected: list[str]
) -> None:
    """A Pods metric scaled on Utilization passes every schema, but the API server takes only an averageValue for
    it (found by a new user: validate said PASS); an Object metric needs a value or averageValue, a Resource one
    not both of its two."""
    kind = metric.split(":")[0].capitalize()
    path = _copy(tmp_path, k8s_edit=(f"type: Pods\n      {POD_METRIC}", f"type: {kind}\n      {metric}"))
    result = run("validate", str(path), "--json")
    assert result.returncode == 1
    errors = [f["message"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert errors == [f"HPA chat-8b: {problem}; the API server refuses it" for problem in expected]


@pytest.mark.parametrize("model", ["/etc/hostname", "/models/llama", "./weights"])
def test_a_model_path_in_the_container_is_not_read_on_this_machine(tmp_path: Path, model: str) -> None:
    path = _copy(tmp_path, k8s_edit=("serve, meta-llama/Llama-3.1-8B-Instruct]", f"serve, {model}]"))
    result = run("validate", str(path))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "k8s.yaml#0: vllm serve: the model " in result.stderr and "a path inside the container" in result.stderr


@pytest.mark.parametrize(("field", "text"), [("engine", "engine: {max_num_seqs: 64}"), ("replicas", "replicas: 5")])
def test_engine_or_replicas_beside_manifests_is_refused(tmp_path: Path, field: str, text: str) -> None:
    path = _copy(tmp_path, ("manifests: [k8s.yaml]", f"manifests: [k8s.yaml]\n{text}"))
    result = run("validate", str(path))
    assert result.returncode == 2 and f"deploy.yaml: {field}: the manifests set the" in result.stderr


def test_a_model_named_in_the_deploy_file_unlike_the_served_one_is_a_warning(tmp_path: Path) -> None:
    path = _copy(tmp_path, ("manifests: [k8s.yaml]", "manifests: [k8s.yaml]\nmodel: Qwen2.5-7B"))
    findings = json.loads(run("validate", str(path), "--json").stdout)["findings"]
    assert any(
        f["check"] == "model" and "predicts model Qwen2.5-7B, but Deployment/chat-8b serves meta-llama" in f["message"]
        for f in findings
    )
    same = _copy(tmp_path / "..", ("manifests: [k8s.yaml]", "manifests: [k8s.yaml]\nmodel: Llama-3.1-8B-Instruct"))
    assert not [f for f in json.loads(run("validate", str(same), "--json").stdout)["findings"] if f["check"] == "model"]


def test_a_sidecar_or_router_whose_image_names_vllm_is_not_a_second_server(tmp_path: Path) -> None:
    """A metrics exporter in the pod (its own command, no GPU) and the production-stack router as a Deployment
    (lmcache/vllm_router: flags for its entrypoint, no GPU): the one vLLM server is still found."""
    sidecar = "        - name: exporter\n          image: ghcr.io/acme/vllm-metrics-exporter:1.2\n"
    sidecar += "          command: [/exporter, --port, '9400']\n        - name: vllm\n"
    path = _copy(tmp_path, k8s_edit=("        - name: vllm\n", sidecar))
    router = (
        "\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: router}\nspec:\n  selector:\n"
        "    matchLabels: {app: router}\n  template:\n    metadata:\n      labels: {app: router}\n    spec:\n"
        "      containers:\n        - name: router\n          image: lmcache/vllm_router:latest\n"
        "          args: [--host, 0.0.0.0, --port, '80', --service-discovery, k8s]\n"
    )
    (tmp_path / "k8s.yaml").write_text((tmp_path / "k8s.yaml").read_text() + router)
    result = run("validate", str(path), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["deployment"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def _edited(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    path = _copy(tmp_path)
    k8s = (tmp_path / "k8s.yaml").read_text()
    for old, new in edits:
        assert old in k8s, old
        k8s = k8s.replace(old, new)
    (tmp_path / "k8s.yaml").write_text(k8s)
    return path


@pytest.mark.parametrize(
    ("edits", "needle"),
    [
        # the API server refuses an extended resource's request without an equal limit
        (
            (("limits: {nvidia.com/gpu: 1, memory: 64Gi}", "limits: {memory: 64Gi}"),),
            "request 1 without an equal limit",
        ),
        # one pod cannot have more GPUs than an 8-GPU H100 node
        (
            (
                ("nvidia.com/gpu: 1", "nvidia.com/gpu: 16"),
                ('"8192", --max-num-seqs', '"8192", -tp, "16", --max-num-seqs'),
            ),
            "one pod requests 16 GPUs, but a H100-SXM5-80GB node has 8",
        ),
        # both must hold: no node is an H100 and an L40S
        (
            (
                (
                    "    spec:\n      affinity:",
                    "    spec:\n      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L40S}\n      affinity:",
                ),
            ),
            "admit no node together",
        ),
        # AMD's device plugin resource on nodes pinned by NVIDIA's GPU label
        ((("nvidia.com/gpu: 1", "amd.com/gpu: 1"),), "request amd.com/gpu but are pinned to nodes by nvidia.com"),
    ],
)
def test_pods_that_would_stay_pending_are_an_error(
    tmp_path: Path, edits: tuple[tuple[str, str], ...], needle: str
) -> None:
    result = run("validate", str(_edited(tmp_path, *edits)), "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [f["message"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert any(needle in message for message in errors), errors


def test_more_gpus_than_vllm_uses_is_a_warning_not_an_error(tmp_path: Path) -> None:
    """TP 1 in a pod of 2 GPUs: vLLM starts on the first device, the other idles (paid for)."""
    path = _edited(
        tmp_path,
        (
            'requests: {nvidia.com/gpu: 1, cpu: "8", memory: 64Gi}',
            'requests: {nvidia.com/gpu: 2, cpu: "8", memory: 64Gi}',
        ),
        ("limits: {nvidia.com/gpu: 1, memory: 64Gi}", "limits: {nvidia.com/gpu: 2, memory: 64Gi}"),
    )
    result = run("validate", str(path), "--json")
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "tp-vs-gpus"]
    assert result.returncode == 0 and finding["severity"] == "warning"
    assert "requests 2 GPUs but vLLM uses 1" in finding["message"] and "1 GPU idle" in finding["message"]
    assert finding["fix"] == "request 1 GPU per pod, or set --tensor-parallel-size 2"


def test_probes_on_another_port_than_vllm_listens_on_are_errors_named_ports_resolved(tmp_path: Path) -> None:
    args = '--max-model-len, "8192", --max-num-seqs, "128", --enable-prefix-caching'
    moved = (args, args + ', --port, "8080"')
    report = json.loads(run("validate", str(_edited(tmp_path, moved)), "--json").stdout)
    probes = sorted(f["message"] for f in report["findings"] if f["check"] == "probes" and f["severity"] == "error")
    assert [m.split(": ", 1)[1].split(",")[0] for m in probes] == [
        "the readinessProbe checks port 8000",
        "the startupProbe checks port 8000",
    ]
    assert "but vLLM listens on 8080: it fails every time; the pod never becomes Ready" in probes[0]
    named = _edited(
        tmp_path,
        moved,
        ("ports: [{containerPort: 8000}]", "ports: [{name: http, containerPort: 8080}]"),
        (
            "httpGet: {path: /health, port: 8000}\n            periodSeconds: 10",
            "httpGet: {path: /health, port: http}\n            periodSeconds: 10",
        ),
        (
            "httpGet: {path: /health, port: 8000}\n            periodSeconds: 5",
            "httpGet: {path: /health, port: 8080}\n            periodSeconds: 5",
        ),
    )
    report = json.loads(run("validate", str(named), "--json").stdout)
    assert not [f for f in report["findings"] if f["check"] == "probes" and f["severity"] == "error"]


def test_a_probe_on_an_undeclared_port_name_is_an_error_and_the_readiness_fix_names_vllms_port(
    tmp_path: Path,
) -> None:
    # The kubelet cannot resolve a port name the container does not declare: the probe fails every time.
    undeclared = _edited(
        tmp_path,
        (
            "httpGet: {path: /health, port: 8000}\n            periodSeconds: 5",
            "httpGet: {path: /health, port: metrics}\n            periodSeconds: 5",
        ),
    )
    report = json.loads(run("validate", str(undeclared), "--json").stdout)
    (finding,) = [f for f in report["findings"] if f["check"] == "probes" and f["severity"] == "error"]
    assert (
        "the readinessProbe checks the port named 'metrics', which the container does not declare"
        in (finding["message"])
    )
    assert finding["fix"] == "name the port in the container's ports, or probe port 8000"
    # Without a readiness probe the fix names the port vLLM listens on (--port), not the default.
    args = '--max-model-len, "8192", --max-num-seqs, "128", --enable-prefix-caching'
    bare = _edited(
        tmp_path,
        (args, args + ', --port, "9000"'),
        ("          ports: [{containerPort: 8000}]\n", ""),
        ("port: 8000}\n            periodSeconds: 10", "port: 9000}\n            periodSeconds: 10"),
        ("          readinessProbe:\n            httpGet: {path: /health, port: 8000}\n", ""),
        ("            periodSeconds: 5\n", ""),
    )
    report = json.loads(run("validate", str(bare), "--json").stdout)
    (finding,) = [f for f in report["findings"] if f["check"] == "probes"]
    assert finding["fix"] == "add a readinessProbe on /health (port 9000)"


def test_a_cpu_limit_without_a_request_is_the_request(tmp_path: Path) -> None:
    # Kubernetes defaults a missing request to its limit (SetDefaults_Pod): no "no CPU request" warning then.
    def cpu_findings(path: Path) -> list[str]:
        report = json.loads(run("validate", str(path), "--json").stdout)
        return [f["message"] for f in report["findings"] if "CPU request" in f["message"]]

    requests = 'requests: {nvidia.com/gpu: 1, cpu: "8", memory: 64Gi}'
    limits = "limits: {nvidia.com/gpu: 1, memory: 64Gi}"
    assert cpu_findings(_edited(tmp_path, (requests, "requests: {nvidia.com/gpu: 1, memory: 64Gi}")))
    moved = _edited(
        tmp_path,
        (requests, "requests: {nvidia.com/gpu: 1, memory: 64Gi}"),
        (limits, 'limits: {nvidia.com/gpu: 1, cpu: "8", memory: 64Gi}'),
    )
    assert cpu_findings(moved) == []


def test_a_kv_cache_short_of_max_num_seqs_warns_only_when_the_prediction_preempts(tmp_path: Path) -> None:
    args = '--max-model-len, "8192", --max-num-seqs, "128", --enable-prefix-caching'
    small = json.loads(
        run("validate", str(_edited(tmp_path, (args, args + ', --gpu-memory-utilization, "0.25"'))), "--json").stdout
    )
    (finding,) = [f for f in small["findings"] if f["check"] == "kv-capacity" and f["severity"] == "warning"]
    assert re.search(
        r"holds 17 sequences, fewer than max_num_seqs 128: [0-9]+ preemptions? predicted", finding["message"]
    )
    assert finding["fix"] == "lower --max-num-seqs to 17, or add KV memory (TP, fp8 KV cache)"
    lone = json.loads(run("validate", str(_edited(tmp_path, (args, args.replace('"128"', '"1024"')))), "--json").stdout)
    assert not [f for f in lone["findings"] if f["check"] == "kv-capacity" and f["severity"] == "warning"]
    assert [f for f in lone["findings"] if "this traffic never fills the batch that far" in f["message"]]


def test_the_header_says_when_the_autoscaler_sets_the_replicas_predicted(tmp_path: Path) -> None:
    result = run("validate", str(_edited(tmp_path, ("spec:\n  replicas: 2", "spec:\n  replicas: 1"))))
    assert result.stdout.splitlines()[0].endswith("1 replica (predicted with 2, as its autoscaler sets)")


def test_a_windowed_model_whose_cache_cannot_hold_max_model_len_is_a_warning(tmp_path: Path) -> None:
    """gemma-2-9b on one L4 at 8,192 tokens: the full-attention and sliding-window groups need 896 blocks for one
    such request, the cache has 501; vLLM 0.15.1 starts (its check sizes a sequence by the first, windowed group)."""
    deploy = tmp_path / "deploy.yaml"
    traffic = "{type: synthetic, arrivals: {type: poisson, rate: 0.5}, prompt_tokens: {type: fixed, value: 200}, "
    traffic += "output_tokens: {type: fixed, value: 50}, duration_s: 20}"
    deploy.write_text(
        f"name: gemma\nmodel: gemma-2-9b\nhardware: L4-24GB\nengine: {{max_model_len: 8192}}\ntraffic: {traffic}\n"
        "slo: {ttft_p99_s: 2.0}\n"
    )
    report = json.loads(run("validate", str(deploy), "--json").stdout)
    (finding,) = [f for f in report["findings"] if f["check"] == "kv-capacity" and f["severity"] == "warning"]
    assert finding["message"].startswith("one request of max_model_len 8,192 tokens cannot be held: 8192 tokens need")
    assert "and such a request is never scheduled" in finding["message"]


def test_an_affinity_term_without_a_gpu_label_admits_any_gpu(tmp_path: Path) -> None:
    """Terms are alternatives: [gpu.product In H100] OR [zone In a] lands on any GPU in zone a; the prediction was
    on H100 (the first value), on L4 with the terms swapped."""
    gpu = "                  - {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}\n"
    zone = "              - matchExpressions:\n"
    zone += "                  - {key: topology.kubernetes.io/zone, operator: In, values: [a]}\n"
    report = json.loads(run("validate", str(_edited(tmp_path, (gpu, gpu + zone))), "--json").stdout)
    (finding,) = [f for f in report["findings"] if f["check"] == "gpu-affinity"]
    assert (
        finding["severity"] == "error"
        and "a term of the required node affinity names no GPU type label" in finding["message"]
    )
    assert report["deployment"]["hardware"] is None


@pytest.mark.parametrize("namespace", [None, "prod", "staging"])
def test_a_configmap_key_the_configmap_in_the_files_lacks_stops_the_container(
    tmp_path: Path, namespace: str | None
) -> None:
    """The Deployment runs in namespace prod: a ConfigMap placed in no namespace or in prod is the one its pods
    read; one in staging is another object (the pods' own is not in the files, so nothing is known of it)."""
    image = "image: vllm/vllm-openai:v0.15.1\n"
    env = "          env: [{name: HF_HOME, valueFrom: {configMapKeyRef: {name: c, key: home}}}]\n"
    path = _edited(tmp_path, (image, image + env), ("metadata:\n  name: ", "metadata:\n  namespace: prod\n  name: "))
    placed = f", namespace: {namespace}" if namespace else ""
    (tmp_path / "k8s.yaml").write_text(
        (tmp_path / "k8s.yaml").read_text()
        + f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{placed}}}\ndata: {{}}\n"
    )
    result = run("validate", str(path), "--json")
    errors = [f["message"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    needle = "env HF_HOME: ConfigMap c has no key home: the kubelet does not start the container"
    missing = any(needle in message for message in errors)
    assert missing == (namespace != "staging"), errors
    assert result.returncode == (1 if missing else 0), errors


def test_an_affinity_that_allows_two_gpu_types_is_a_warning_naming_both(tmp_path: Path) -> None:
    path = _edited(
        tmp_path, ("values: [NVIDIA-H100-80GB-HBM3]", "values: [NVIDIA-H100-80GB-HBM3, NVIDIA-A100-SXM4-80GB]")
    )
    report = json.loads(run("validate", str(path), "--json").stdout)
    warnings = [f["message"] for f in report["findings"] if f["check"] == "gpu-affinity"]
    assert (
        len(warnings) == 1
        and "may land on H100-SXM5-80GB, A100-SXM4-80GB; predicted on A100-SXM4-80GB (the slowest)" in warnings[0]
    )
    assert report["deployment"]["hardware"] == "A100-SXM4-80GB"
    reversed_values = "values: [NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3]"
    again = json.loads(
        run("validate", str(_edited(tmp_path, ("values: [NVIDIA-H100-80GB-HBM3]", reversed_values))), "--json").stdout
    )
    assert again["prediction"] == report["prediction"]  # the order the values are listed in changes nothing


def test_required_node_affinity_terms_are_alternatives_and_their_expressions_all_hold() -> None:
    """nodeSelectorTerms are ORed, a term's expressions ANDed: a GPU key is constrained only where every term
    constrains it (a term on another label admits any GPU: a nodeSelector naming another GPU is then no conflict),
    to the union of what each term allows; a term without expressions matches no node."""
    from ttftsim.validate.gpu_scheduling import _gpu_constraints

    def allowed(*terms: list[tuple[str, list[str]]]) -> dict[str, list[str]]:
        expressions = [
            {"matchExpressions": [{"key": k, "operator": "In", "values": v} for k, v in term]} for term in terms
        ]
        pod = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = [
            *expressions,
            {"matchExpressions": []},
        ]
        return _gpu_constraints(pod)[1]

    gpu, h100, a100 = "nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"
    assert allowed([(gpu, [h100])], [(gpu, [a100])]) == {gpu: [h100, a100]}
    assert allowed([(gpu, [h100])], [("topology.kubernetes.io/zone", ["a"])]) == {}
    assert allowed([(gpu, [h100, a100]), (gpu, [a100])]) == {gpu: [a100]}
    assert allowed([(gpu, [h100])]) == {gpu: [h100]}


def test_requests_longer_than_max_model_len_are_a_rejected_finding_not_a_replica_count(tmp_path: Path) -> None:
    """--max-model-len 2048 under lognormal prompts up to 6,000 tokens: the engine refuses the longer requests
    (HTTP 400); the finding says how many and what length would admit them, and the SLO miss is not sent to more
    replicas (each refuses them too)."""
    path = _edited(tmp_path, ('--max-model-len, "8192"', '--max-model-len, "2048"'))
    report = json.loads(run("validate", str(path), "--json").stdout)
    (refused,) = [f for f in report["findings"] if f["check"] == "rejected"]
    assert (
        "are refused by the engine, e.g. prompt " in refused["message"]
        and "exceed max_model_len 2048" in refused["message"]
    )
    assert refused["fix"].startswith("raise --max-model-len to at least ")
    assert int(refused["fix"].split()[5].replace(",", "")) > 2048
    slo = next(f for f in report["findings"] if f["check"] == "slo")
    assert "more replicas refuse them too" in slo["fix"]


@pytest.mark.parametrize(
    ("args", "field", "says"),
    [
        ('args: "--max-model-len 8192"', "containers.0.args", "must be a list of strings"),
        ('args: ["--max-model-len 8192 --max-num-seqs 128"]', "containers.0.args.0", "holds several words"),
    ],
)
def test_command_lines_kubernetes_would_not_split_are_refused_naming_the_item(
    tmp_path: Path, args: str, field: str, says: str
) -> None:
    path = _edited(tmp_path, ('args: [--max-model-len, "8192", --max-num-seqs, "128", --enable-prefix-caching]', args))
    result = run("validate", str(path))
    assert result.returncode == 2 and f"k8s.yaml#0: {field}: " in result.stderr and says in result.stderr


def test_an_item_of_several_words_is_quoted_as_a_short_excerpt(tmp_path: Path) -> None:
    """The message quoted the whole item (a KServe runtime's script filled the line and lost its reason)."""
    long_item = '["--max-model-len 8192 --max-num-seqs 128 --enable-prefix-caching --gpu-memory-utilization 0.9"]'
    path = _edited(
        tmp_path,
        ('args: [--max-model-len, "8192", --max-num-seqs, "128", --enable-prefix-caching]', f"args: {long_item}"),
    )
    result = run("validate", str(path))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path / 'k8s.yaml'}#0: containers.0.args.0: '--max-model-len 8192 --max-num-seqs 128 '... "
        "holds several words: Kubernetes passes it to vLLM as one argument; write one flag or value per item"
    )


def test_a_whole_command_line_in_one_command_item_is_refused_naming_it(tmp_path: Path) -> None:
    one = (
        "command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]",
        'command: ["vllm serve meta-llama/Llama-3.1-8B-Instruct"]',
    )
    result = run("validate", str(_edited(tmp_path, one)))
    assert result.returncode == 2 and "k8s.yaml#0: containers.0.command.0: " in result.stderr
    assert "Kubernetes runs it as one program name" in result.stderr


def test_another_kind_whose_pods_run_vllm_is_named_unsupported(tmp_path: Path) -> None:
    """An Argo Rollout (the same pod template as a Deployment) was 'no Deployment ... with a vLLM container'."""
    rollout = ("apiVersion: apps/v1\nkind: Deployment", "apiVersion: argoproj.io/v1alpha1\nkind: Rollout")
    result = run("validate", str(_edited(tmp_path, rollout)), "--json")
    assert result.returncode == 1, result.stderr
    errors = [f["message"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert any("Rollout/chat-8b is not supported" in message for message in errors), errors


def _findings(path: Path, check: str) -> list[tuple[str, str, str]]:
    report = validate(path, []).as_json()
    return [(f["severity"], f["message"], f["fix"]) for f in report["findings"] if f["check"] == check]


def test_a_misspelt_gpu_resource_keeps_the_pod_pending_and_names_the_device_plugins(tmp_path: Path) -> None:
    """`nvidia.com/gpus` was 'requests no nvidia.com/gpu; it may land on a CPU node'."""
    typo = ("requests: {nvidia.com/gpu: 1, cpu", "requests: {nvidia.com/gpus: 1, cpu")
    path = _edited(tmp_path, typo, ("limits: {nvidia.com/gpu: 1,", "limits: {nvidia.com/gpus: 1,"))
    assert _findings(path, "gpu-request") == [
        (
            "error",
            "Deployment/chat-8b: the vLLM container requests nvidia.com/gpus, a resource no node advertises (the "
            "device plugin's is nvidia.com/gpu): the pod stays Pending",
            "rename it nvidia.com/gpu: 1",
        )
    ]


@pytest.mark.parametrize(
    ("gpus", "fix"),
    [
        (9, "request 4 GPUs per pod"),  # TP 9 was suggested: above an H100 node's 8, and does not divide 32 heads
        (16, "request 4 GPUs per pod"),  # TP 16 divides Llama-8B's 32 heads, but 16 GPUs exceed a node's 8
        (6, "request 4 GPUs per pod"),  # fits a node, but TP 6 does not divide 32 heads
        (8, "request 4 GPUs per pod, or set --tensor-parallel-size 8"),
    ],
)
def test_idle_gpus_suggest_only_a_tensor_parallel_size_vllm_could_start_with(
    tmp_path: Path, gpus: int, fix: str
) -> None:
    tp = ("--enable-prefix-caching]", '--enable-prefix-caching, --tensor-parallel-size, "4"]')
    requests = ("requests: {nvidia.com/gpu: 1,", f"requests: {{nvidia.com/gpu: {gpus},")
    path = _edited(tmp_path, tp, requests, ("limits: {nvidia.com/gpu: 1,", f"limits: {{nvidia.com/gpu: {gpus},"))
    (idle,) = [f for f in _findings(path, "tp-vs-gpus") if f[0] == "warning"]
    assert idle[1].startswith(f"Deployment/chat-8b: the pod requests {gpus} GPUs but vLLM uses 4 ")
    assert idle[2] == fix


SHM_MOUNT = (
    "ports: [{containerPort: 8000}]",
    "ports: [{containerPort: 8000}]\n          volumeMounts: [{name: shm, mountPath: /dev/shm}]",
)


@pytest.mark.parametrize(
    ("size_limit", "expected"),
    [
        (
            "1Mi",
            [
                (
                    "warning",
                    "Deployment/chat-8b: 2 GPUs a replica (tensor x pipeline x data parallel) with a /dev/shm emptyDir "
                    "of sizeLimit 1Mi, below the 64 MB default; NCCL falls back or fails",
                    "raise the /dev/shm emptyDir's sizeLimit (ttftsim plan's manifests give 16Gi for several GPUs a "
                    "pod)",
                )
            ],
        ),
        ("1Gi", []),
    ],
)
def test_a_tiny_dev_shm_under_tensor_parallelism_is_flagged_like_a_missing_one(
    tmp_path: Path, size_limit: str, expected: list[tuple[str, str, str]]
) -> None:
    tp = ("--enable-prefix-caching]", '--enable-prefix-caching, --tensor-parallel-size, "2"]')
    gpus = ("nvidia.com/gpu: 1", "nvidia.com/gpu: 2")  # the request and the limit
    volume = (
        "      containers:\n",
        f"      volumes: [{{name: shm, emptyDir: {{medium: Memory, sizeLimit: {size_limit}}}}}]\n      containers:\n",
    )
    path = _edited(tmp_path, tp, gpus, SHM_MOUNT, volume)
    assert _findings(path, "shared-memory") == expected


def _unsupported(result: subprocess.CompletedProcess[str]) -> list[tuple[str, str]]:
    assert result.returncode == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    return [(f["message"], f["fix"]) for f in findings if f["severity"] == "error"]


def test_a_deployment_running_the_grpc_entrypoint_names_its_container(tmp_path: Path) -> None:
    """GIE's gpu-grpc-deployment.yaml (`python3 -m vllm.entrypoints.grpc_server`) was 'no Deployment ... with a vLLM
    container'."""
    grpc = (
        "command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]",
        "command: [python3, -m, vllm.entrypoints.grpc_server, --model, meta-llama/Llama-3.1-8B-Instruct]",
    )
    path = _edited(tmp_path, grpc)
    assert _unsupported(run("validate", str(path), "--json")) == [
        (
            f"{tmp_path / 'k8s.yaml'}#0: Deployment/chat-8b: container vllm runs vllm.entrypoints.grpc_server (vLLM's "
            "gRPC server), which validate does not read (it reads `vllm serve` or vllm.entrypoints.openai.api_server)",
            "validate a copy whose container runs `vllm serve` with the same flags (it parses the same ones)",
        )
    ]


def test_an_llm_inference_service_config_alone_is_named_as_a_template(tmp_path: Path) -> None:
    config = (
        "apiVersion: serving.kserve.io/v1alpha2\nkind: LLMInferenceServiceConfig\nmetadata: {name: prefix-caching}\n"
        "spec:\n  template:\n    containers:\n    - name: main\n      args: [--enable-prefix-caching]\n"
    )
    (tmp_path / "config.yaml").write_text(config)
    deploy = _copy(tmp_path, ("manifests: [k8s.yaml]", "manifests: [config.yaml]"))
    assert _unsupported(run("validate", str(deploy), "--json")) == [
        (
            f"{tmp_path / 'config.yaml'}#0: LLMInferenceServiceConfig/prefix-caching: a template an "
            "LLMInferenceService merges in (spec.baseRefs), with no pods of its own",
            "validate it with the LLMInferenceService that names it in spec.baseRefs (read merged into it)",
        )
    ]


def test_which_other_kinds_run_a_vllm_server() -> None:
    """A bare Pod, a Job and a CronJob's Jobs that run `vllm serve` are servers of an unsupported kind; a Job that runs
    `vllm bench serve` against the service, or an exporter whose image name holds vllm, is not a server."""
    from ttftsim.validate.k8s_schema import _other_vllm_pods

    server = {"name": "s", "image": "vllm/vllm-openai:v0.15.1", "args": ["--model", "m"]}
    bench = {"name": "b", "image": "vllm/vllm-openai:v0.15.1", "command": ["vllm", "bench", "serve", "--model", "m"]}
    exporter = {"name": "e", "image": "example/vllm-exporter:1", "command": ["/exporter"]}

    def pod(*containers: dict[str, object]) -> dict[str, object]:
        return {"containers": list(containers)}

    job_spec = {"template": {"spec": pod(server)}}
    assert _other_vllm_pods({"kind": "Pod", "spec": pod(server)}) == "Pod"
    assert _other_vllm_pods({"kind": "Job", "spec": job_spec}) == "Job"
    assert _other_vllm_pods({"kind": "CronJob", "spec": {"jobTemplate": {"spec": job_spec}}}) == "CronJob"
    assert _other_vllm_pods({"kind": "Job", "spec": {"template": {"spec": pod(bench, exporter)}}}) is None
    bench_job = {"template": {"spec": pod(bench)}}
    assert _other_vllm_pods({"kind": "CronJob", "spec": {"jobTemplate": {"spec": bench_job}}}) is None


def test_a_json_value_with_a_negative_number_is_one_argument() -> None:
    from ttftsim.validate.serving_container import _check_one_argument_each

    container = {"command": ["vllm", "serve", "m"], "args": ["--override-generation-config", '{"temperature": -1}']}
    _check_one_argument_each("k8s.yaml", 0, container)  # no error


def test_an_unversioned_vllm_version_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = _copy(tmp_path, ("name: chat-8b", "name: chat-8b\nvllm_version: latest"))
    result = run("validate", str(path))
    assert (
        result.returncode == 2 and "deploy.yaml: vllm_version: vLLM version 'latest' is not a version" in result.stderr
    )


def test_an_empty_manifest_file_is_named(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    (tmp_path / "k8s.yaml").write_text("# nothing yet\n---\n")
    result = run("validate", str(path))
    assert result.returncode == 2 and result.stderr.strip().endswith(
        "k8s.yaml: no Kubernetes object in it (empty, or only comments and --- separators)"
    )


def test_an_unrendered_helm_template_says_so(tmp_path: Path) -> None:
    path = _edited(tmp_path, ("limits: {nvidia.com/gpu: 1,", 'limits: {nvidia.com/gpu: "{{ .Values.gpus }}",'))
    result = run("validate", str(path))
    assert result.returncode == 2 and "limits.nvidia.com/gpu: Input should be a valid integer" in result.stderr
    assert "constrained-int" not in result.stderr and "a Helm template left unrendered" in result.stderr


def test_an_unpinned_vllm_image_is_a_warning_and_a_replica_fix_names_the_field_to_set(tmp_path: Path) -> None:
    path = _edited(
        tmp_path,
        ("image: vllm/vllm-openai:v0.15.1", "image: vllm/vllm-openai:latest"),
        ("name: chat-8b}\n  minReplicas", "name: other}\n  minReplicas"),
    )
    (tmp_path / "deploy.yaml").write_text((tmp_path / "deploy.yaml").read_text().replace("rate: 12", "rate: 60"))
    findings = json.loads(run("validate", str(path), "--json").stdout)["findings"]
    assert any("vllm/vllm-openai:latest is not pinned to a release" in f["message"] for f in findings)
    slo = next(f for f in findings if f["check"] == "slo")
    assert slo["fix"].startswith("run ") and slo["fix"].endswith(" replicas (replicas: " + slo["fix"].split()[1] + ")")


def test_an_ambiguous_hardware_name_lists_only_what_it_could_mean_naming_the_deploy_file(tmp_path: Path) -> None:
    path = _copy(tmp_path, ("name: chat-8b", "name: chat-8b\nhardware: H100"))
    result = run("validate", str(path))
    assert result.returncode == 2
    assert result.stderr.strip().endswith(
        "deploy.yaml: hardware: ambiguous hardware 'H100': one of H100-PCIe-80GB, H100-SXM5-80GB"
    )


def test_a_mig_slice_is_a_warning_that_the_prediction_is_a_whole_gpus(tmp_path: Path) -> None:
    path = _edited(tmp_path, ("nvidia.com/gpu: 1", "nvidia.com/mig-3g.40gb: 1"))
    findings = json.loads(run("validate", str(path), "--json").stdout)["findings"]
    gpu = [f for f in findings if f["check"] == "gpu-request"]
    assert [f["severity"] for f in gpu] == ["warning"] and "MIG slice (nvidia.com/mig-3g.40gb)" in gpu[0]["message"]


def test_a_keda_scaled_object_sets_the_replicas_predicted(tmp_path: Path) -> None:
    """KEDA's ScaledObject (its HPA is KEDA's to make) in place of the HPA: minReplicaCount 3 is predicted; 0 (its
    default) predicts 1 with a warning."""
    k8s = (EXAMPLE / "k8s.yaml").read_text().split("---")[0]
    for low, predicted in (("minReplicaCount: 3\n  ", 3), ("", 1)):
        keda = (
            "---\napiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: chat-8b}\nspec:\n"
            f"  scaleTargetRef: {{name: chat-8b}}\n  {low}maxReplicaCount: 6\n"
            "  triggers: [{type: prometheus, metadata: {query: x, threshold: '5', serverAddress: http://p:9090}}]\n"
        )
        (tmp_path / "k8s.yaml").write_text(k8s + keda)
        path = _copy(tmp_path) if not (tmp_path / "deploy.yaml").exists() else tmp_path / "deploy.yaml"
        (tmp_path / "k8s.yaml").write_text(k8s + keda)
        report = json.loads(run("validate", str(path), "--json").stdout)
        assert report["prediction"]["replicas"] == predicted
        assert any("minReplicaCount 0" in f["message"] for f in report["findings"]) == (predicted == 1)


def test_the_rejected_fix_follows_the_reason_of_each_refusal() -> None:
    import pandas as pd

    from ttftsim.validate.prediction import _refused
    from ttftsim.validate.report import Report

    rows = pd.DataFrame(
        {
            "status": ["rejected", "rejected", "finished"],
            "reason": [
                "prompt 250 + output 50 tokens exceed max_model_len 256",
                "200000 tokens exceed the KV cache (100 blocks of 16)",
                "",
            ],
            "prompt_tokens": [250, 199000, 10],
            "output_tokens": [50, 1000, 10],
        }
    )
    report = Report("x")
    assert _refused(report, rows) == 2
    (finding,) = report.findings
    assert finding.fix.startswith("raise --max-model-len to at least 300 ")  # not the KV-refused 200,000
    static = rows.assign(
        reason=["a static reservation of max_model_len 4096 tokens exceeds the KV cache (9 blocks of 16)"] * 3
    )
    report = Report("x")
    _refused(report, static.iloc[:2])
    assert not report.findings[0].fix.startswith("raise --max-model-len")


def test_another_workloads_hpa_in_the_files_is_not_checked_as_the_servers(tmp_path: Path) -> None:
    """A router Deployment with its own CPU HPA beside the vLLM Deployment (which has none): no hpa finding."""
    router = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: router}\nspec:\n  selector:\n"
        "    matchLabels: {app: router}\n  template:\n    metadata:\n      labels: {app: router}\n    spec:\n"
        "      containers:\n        - {name: router, image: 'lmcache/vllm_router:latest', args: [--port, '80']}\n---\n"
    )
    path = _edited(tmp_path, ("name: chat-8b}\n  minReplicas", "name: router}\n  minReplicas"))
    k8s = (tmp_path / "k8s.yaml").read_text().replace("    - type: Pods", "    - type: Resource", 1)
    (tmp_path / "k8s.yaml").write_text(router + k8s)
    findings = json.loads(run("validate", str(path), "--json").stdout)["findings"]
    assert [f for f in findings if f["check"] == "hpa"] == []


def test_a_fixed_cluster_has_a_node_for_every_replica_that_does_not_share_one() -> None:
    from ttftsim.cluster.run import fixed_cluster

    def nodes(replicas: int, gpus: int) -> int:
        return int(fixed_cluster("H100-SXM5-80GB", replicas, gpus, "round_robin")["node_pools"][0]["max_nodes"])

    assert [nodes(4, 6), nodes(5, 3), nodes(4, 2), nodes(1, 16), nodes(3, 12)] == [4, 3, 1, 2, 6]


def _kv_tokens(tmp_path: Path, version: str, extra: str = "") -> int:
    tmp_path.mkdir()
    image = "image: vllm/vllm-openai:v0.15.1"
    flags = 'args: [--max-model-len, "8192", --max-num-seqs, "128", --enable-prefix-caching'
    path = _edited(tmp_path, (image, f"image: vllm/vllm-openai:v{version}"), (flags, flags + extra))
    path.write_text(path.read_text() + f'vllm_version: "{version}"\n')
    result = run("validate", str(path), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [f["message"] for f in json.loads(result.stdout)["findings"] if f["message"].startswith("KV cache ")]
    return int(line.split()[2].replace(",", ""))


def test_vllm_034_sizes_the_kv_cache_from_measured_memory_in_64_token_blocks(tmp_path: Path) -> None:
    """vLLM 0.34: 64-token blocks by default, and the extensible KV cache (gpu_memory_utilization 1.0 less a
    margin) unless --no-enable-extensible-kv-cache, which sizes it as 0.33 does (0.92 of the device) with
    64-token blocks."""
    measured = _kv_tokens(tmp_path / "a", "0.34.0")
    estimated = _kv_tokens(tmp_path / "b", "0.34.0", ", --no-enable-extensible-kv-cache")
    as_033 = _kv_tokens(tmp_path / "c", "0.33.0", ', --block-size, "64"')
    assert measured % 64 == 0 and estimated == as_033 and measured > estimated


def test_without_manifests_model_and_hardware_are_enough(tmp_path: Path) -> None:
    """Engine arguments default to the version's when a deployment file without manifests gives none; without a
    model (or hardware) the one line names that field."""
    traffic = "traffic: {type: synthetic, arrivals: {type: poisson, rate: 2}, num_requests: 20, "
    traffic += (
        "prompt_tokens: {type: fixed, value: 100}, output_tokens: {type: fixed, value: 10}}\nslo: {ttft_p99_s: 1}\n"
    )
    bare = tmp_path / "bare.yaml"
    bare.write_text("model: Llama-3.1-8B\nhardware: H100-SXM5-80GB\n" + traffic)
    result = run("validate", str(bare), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    no_model = tmp_path / "no-model.yaml"
    no_model.write_text("hardware: H100-SXM5-80GB\n" + traffic)
    _assert_one_line_error(run("validate", str(no_model)), "model", "give Kubernetes manifests, or model and hardware")


def test_a_gpu_label_of_the_clusters_own_is_named_and_hardware_asked_for(tmp_path: Path) -> None:
    # pinned on gpu.nvidia.com/model (not a label the profiles name GPUs by): the GPU type is there, unreadable
    edit = (
        "{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}",
        "{key: gpu.nvidia.com/model, operator: In, values: [H200]}",
    )
    result = run("validate", str(_edited(tmp_path, edit)), "--json")
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "gpu-affinity"]
    assert (
        finding["severity"] == "error"
        and "the pods select on gpu.nvidia.com/model, not a GPU type label" in (finding["message"])
    )
    assert finding["fix"] == "set hardware in the deployment file"
    # a feature-discovery label that pins no type (nvidia.com/gpu.present) keeps the "any GPU" finding
    edit = (edit[0], "{key: nvidia.com/gpu.present, operator: In, values: ['true']}")
    result = run("validate", str(_edited(tmp_path, edit)), "--json")
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "gpu-affinity"]
    assert "no nodeSelector or required node affinity on a GPU type label" in finding["message"]


def test_a_command_with_an_unbalanced_quote_names_its_container(tmp_path: Path) -> None:
    edit = ("command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]", 'command: [sh, -c, "vllm serve \'m"]')
    result = run("validate", str(_edited(tmp_path, edit)))
    _assert_one_line_error(result, "containers.0.command", "container 'vllm'", "No closing quotation")


def test_an_undefined_variable_in_exec_form_args_reaches_vllm_as_written(tmp_path: Path) -> None:
    """`$(TPX)` with no env: no shell runs, Kubernetes passes it as written, and vLLM refuses it as an int (an error
    finding, found by a new user: it was an input error about a shell). From a ConfigMap that is not in the files,
    or in a shell script, the value is not known here: still an input error; so is such a model (none to predict)."""
    args = ('"128", --enable-prefix-caching]', '"128", --enable-prefix-caching, --tensor-parallel-size, "$(TPX)"]')
    result = run("validate", str(_edited(tmp_path, args)), "--json")
    assert result.returncode == 1, result.stderr
    errors = [f["message"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert errors == [
        f"{tmp_path / 'k8s.yaml'}#0 container vllm: --tensor-parallel-size: $(TPX) is not defined in the container's "
        "env, so Kubernetes passes it to vLLM as written (no shell runs here) and vLLM 0.15.1 refuses it and exits at "
        "start: invalid int value: '$(TPX)'"
    ]
    env = "          env: [{name: TPX, valueFrom: {configMapKeyRef: {name: cfg, key: tp}}}]\n          ports:"
    unknown = run("validate", str(_edited(tmp_path, args, ("          ports:", env))))
    _assert_one_line_error(unknown, "--tensor-parallel-size: its value is $(TPX)", "not known here")
    command = "command: [vllm, serve, meta-llama/Llama-3.1-8B-Instruct]"
    script = 'command: [sh, -c, "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size $(TPX)"]'
    shell = run("validate", str(_edited(tmp_path, (command, script))))
    _assert_one_line_error(shell, "--tensor-parallel-size: its value is $(TPX)", "a shell would run as a command")
    model = run("validate", str(_edited(tmp_path, ("serve, meta-llama/Llama-3.1-8B-Instruct]", 'serve, "$(MODEL)"]'))))
    _assert_one_line_error(model, "model: $(MODEL) is not defined in the container's env", "finding no model")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "vllm:num_requests_waitng",
            "vllm:num_requests_waitng is not a metric vLLM exports (did you mean vllm:num_requests_waiting?)",
        ),
        ("vllm_gpu_cache_usage_perc", "removed in 0.33: use vllm_kv_cache_usage_perc"),
        ("vllm:kv_cache_usage_percent", "(did you mean vllm:kv_cache_usage_perc?): the HPA would get no value"),
    ],
)
def test_an_hpa_on_a_metric_vllm_does_not_export_is_a_warning(tmp_path: Path, name: str, expected: str) -> None:
    path = _copy(tmp_path, k8s_edit=('metric: {name: "vllm:num_requests_waiting"}', f'metric: {{name: "{name}"}}'))
    result = run("validate", str(path), "--json")
    hpa = [f for f in json.loads(result.stdout)["findings"] if f["check"] == "hpa"]
    assert [(f["severity"], expected in f["message"]) for f in hpa] == [("warning", True)], hpa


@pytest.mark.parametrize(
    "name",
    [
        "vllm:num_requests_waiting",
        "vllm_num_requests_waiting",
        "vllm:prompt_tokens_total",
        "queue_depth",
        "vllm_queue_depth",  # far from every vLLM name: perhaps an adapter's own
        "vllm:gpu_prefix_cache_hits",  # an earlier release's
    ],
)
def test_an_hpa_on_a_metric_vllm_exports_or_not_a_vllm_name_passes_the_name_check(tmp_path: Path, name: str) -> None:
    path = _copy(tmp_path, k8s_edit=('metric: {name: "vllm:num_requests_waiting"}', f'metric: {{name: "{name}"}}'))
    findings = json.loads(run("validate", str(path), "--json").stdout)["findings"]
    assert not [f for f in findings if f["check"] == "hpa"]


def test_a_deployment_whose_selector_misses_its_pods_is_an_error(tmp_path: Path) -> None:
    """A selector that does not match the template's labels passes every schema but the API server refuses it
    (found by a new user: validate said PASS)."""
    path = _copy(tmp_path, k8s_edit=("matchLabels: {app: chat-8b}", "matchLabels: {app: chat}"))
    result = run("validate", str(path), "--json")
    assert result.returncode == 1
    errors = [f["message"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert errors == [
        f"{tmp_path / 'k8s.yaml'}#0 Deployment/chat-8b: spec.selector does not match the template's labels "
        "(app=chat not among {app=chat-8b}); the API server refuses it"
    ]


@pytest.mark.parametrize(("memory", "warned"), [("4Gi", True), ("14Gi", True), ("16Gi", False), ("64Gi", False)])
def test_a_memory_limit_below_the_weights_the_pod_loads_is_a_warning(tmp_path: Path, memory: str, warned: bool) -> None:
    """Llama-3.1-8B's 16.06 GB of bf16 weights go through host memory as they load: a limit of 14Gi (15.0 GB) is
    below them, 16Gi (17.2 GB) is not."""
    limits = f"limits: {{nvidia.com/gpu: 1, memory: {memory}}}"
    path = _copy(tmp_path, k8s_edit=("limits: {nvidia.com/gpu: 1, memory: 64Gi}", limits))
    findings = json.loads(run("validate", str(path), "--json").stdout)["findings"]
    found = [f for f in findings if "below the pod's share of the weights" in f["message"]]
    assert [f["severity"] for f in found] == (["warning"] if warned else [])


def test_containers_out_of_their_pod_template_are_the_schema_errors_not_a_missing_workload(tmp_path: Path) -> None:
    """`spec.containers` in a Deployment: the schema error says where, with exit 1; it was exit 2 saying there is
    no Deployment with a vLLM container, though there is one."""
    path = _copy(tmp_path)
    deployment, *rest = yaml.safe_load_all((tmp_path / "k8s.yaml").read_text())
    deployment["spec"]["containers"] = deployment["spec"]["template"]["spec"].pop("containers")
    (tmp_path / "k8s.yaml").write_text(yaml.safe_dump_all([deployment, *rest]))
    result = run("validate", str(path), "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    findings = [(f["check"], f["message"]) for f in json.loads(result.stdout)["findings"]]
    assert findings[0][0] == "k8s-schema" and "('containers' was unexpected)" in findings[0][1]
    assert findings[-1][0] == "no-workload" and "its container is under spec, where Kubernetes" in findings[-1][1]


def test_a_missing_calibration_file_is_the_deploy_files_calibration_not_a_vllm_flag(tmp_path: Path) -> None:
    """With manifests, every engine.* error is a flag of the manifest's vllm command line; this one is the deploy
    file's own `calibration` (it read `k8s.yaml#0: --calibration`, a flag vLLM does not have)."""
    path = _copy(tmp_path, deploy_edit=("name: chat-8b", "name: chat-8b\ncalibration: nope.json"))
    result = run("validate", str(path), "--json")
    messages = [f["message"] for f in json.loads(result.stdout)["findings"] if f["check"] == "engine"]
    assert messages == [f"{path}: calibration: no calibration file {tmp_path / 'nope.json'}"], result.stdout
