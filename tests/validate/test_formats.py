"""`ttftsim validate` on public manifests and chart values (tests/data/manifests/, sources in its README):
each gives a prediction or a named unsupported-kind finding, with the findings each must give asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.plan.test_manifests import make_candidate, make_spec
from tests.test_cli import run
from ttftsim.errors import InputError
from ttftsim.plan.k8s.alternatives import kserve_inference_service, production_stack_values
from ttftsim.validate.formats import render_workloads
from ttftsim.validate.manifests import find_serving, read_documents
from ttftsim.validate.run import validate

DATA = Path(__file__).resolve().parents[1] / "data" / "manifests"
DEPLOY = """name: public
hardware: {hardware}
traffic:
  type: synthetic
  arrivals: {{type: poisson, rate: 2}}
  prompt_tokens: {{type: fixed, value: 1000}}
  output_tokens: {{type: fixed, value: 100}}
  duration_s: 30
slo:
  ttft_p99_s: 1.0
"""


def _validate(tmp_path: Path, files: list[str], hardware: str = "H100-SXM5-80GB", extra: str = "") -> dict[str, Any]:
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY.format(hardware=hardware) + extra)
    return validate(deploy, [DATA / f for f in files]).as_json()


def _checks(report: dict[str, Any], severity: str) -> list[str]:
    return [f["check"] for f in report["findings"] if f["severity"] == severity]


PREDICTED = [
    # file(s), hardware, model, replicas, engine arguments read (exactly), error checks
    (
        ["vllm-docs-k8s-nvidia.yaml"],
        "H100-SXM5-80GB",
        "mistralai/Mistral-7B-Instruct-v0.3",
        1,
        {"max_num_batched_tokens": 1024},  # written --max_num_batched_tokens
        [],
    ),
    (
        ["vllm-docs-k8s-amd.yaml"],
        "MI300X-192GB",
        "mistralai/Mistral-7B-v0.3",
        1,
        {"max_num_batched_tokens": 1024},
        [],  # amd.com/gpu: 1 is a GPU request
    ),
    (
        ["lws-vllm-gpu.yaml"],
        "H100-SXM5-80GB",
        "meta-llama/Llama-3.1-405B-Instruct",
        2,
        {"tensor_parallel_size": 8, "pipeline_parallel_size": 2},  # --pipeline_parallel_size 2
        [],  # 2 pods x 8 GPUs = TP 8 x PP 2: no tp-vs-gpus error
    ),
    (
        ["production-stack-values-02-basic-config.yaml"],
        "H100-SXM5-80GB",
        "meta-llama/Llama-3.1-8B-Instruct",
        1,
        {
            "max_model_len": 4096,
            "gpu_memory_utilization": 0.8,  # extraArgs
            "enable_prefix_caching": False,  # the chart writes --no-enable-prefix-caching
            "enable_chunked_prefill": False,
            "dtype": "bf16",
        },
        [],
    ),
    (
        ["production-stack-values-25-v100-multi-gpu-tp2.yaml"],
        "A100-SXM4-40GB",
        "Qwen/Qwen2.5-7B-Instruct",
        1,
        {
            "tensor_parallel_size": 2,  # requestGPU 2: no tp-vs-gpus error
            "max_model_len": 8192,
            "gpu_memory_utilization": 0.9,  # the chart writes --gpu_memory_utilization
            "enable_prefix_caching": False,
            "dtype": "fp16",  # half
            "enforce_eager": True,
        },
        [],
    ),
    (
        ["production-stack-values-17-kv-aware.yaml"],
        "H100-SXM5-80GB",
        "openai/gpt-oss-20b",
        2,
        # enablePrefixCaching true: vLLM's default; lmcacheConfig as the chart renders it (a 60 GB CPU tier)
        {"max_model_len": 8000, "gpu_memory_utilization": 0.9}
        | {"kv_transfer_config": {"kv_connector": "LMCacheConnectorV1"}, "lmcache": {"max_local_cpu_size": 60.0}},
        [],
    ),
    (
        ["kserve-llmisvc-qwen2-7b-amd.yaml"],
        "MI300X-192GB",
        "Qwen/Qwen2.5-7B-Instruct",
        2,
        {},
        [],
    ),
    (
        ["llm-d-modelservice-values-gaudi.yaml"],
        "H100-SXM5-80GB",
        "meta-llama/Llama-3.1-8B-Instruct",  # pvc+hf://model-pvc/meta-llama/Llama-3.1-8B-Instruct
        1,
        {"max_num_batched_tokens": 16000, "max_num_seqs": 256, "max_model_len": 2048, "block_size": 128},
        ["vllm-args", "gpu-request"],  # --max-seq-len-to-capture is gone in 0.15; habana.ai/gaudi is no GPU
    ),
    (
        ["gie-vllm-gpu-deployment.yaml"],
        "H100-SXM5-80GB",
        "Qwen/Qwen3-32B",  # python3 -m vllm.entrypoints.openai.api_server --model
        3,
        # --max-num-seq: argparse's prefix match, a warning; its LoRA flags are modelled
        {"max_num_seqs": 1024, "max_model_len": 16000, "enable_lora": True, "max_loras": 2, "max_lora_rank": 8}
        | {"max_cpu_loras": 12},
        [],
    ),
    (
        ["kustomize-vllm-docs-nvidia.yaml"],
        "H100-SXM5-80GB",
        "mistralai/Mistral-7B-Instruct-v0.3",
        3,  # the kustomization's patch
        {"max_num_batched_tokens": 1024},
        [],
    ),
]


@pytest.mark.parametrize(("files", "hardware", "model", "replicas", "engine", "errors"), PREDICTED)
def test_public_manifests_give_a_prediction(
    tmp_path: Path,
    files: list[str],
    hardware: str,
    model: str,
    replicas: int,
    engine: dict[str, Any],
    errors: list[str],
) -> None:
    report = _validate(tmp_path, files, hardware)
    assert report["deployment"]["model"] == model
    assert report["deployment"]["replicas"] == replicas
    assert report["deployment"]["engine"] == engine
    assert _checks(report, "error") == errors
    assert report["prediction"]["replicas"] == replicas
    assert 0.0 < report["prediction"]["ttft_p99_s"] < 1.0


def test_the_lws_tp8_pp2_example_is_one_replica_per_16_gpus(tmp_path: Path) -> None:
    report = _validate(tmp_path, ["lws-vllm-gpu.yaml"])
    assert "tp-vs-gpus" not in [f["check"] for f in report["findings"]]
    kv = [f["message"] for f in report["findings"] if f["check"] == "kv-capacity" and f["severity"] == "info"]
    assert kv[0].endswith("tokens on 16 x H100-SXM5-80GB; max_model_len x max_num_seqs = 134,217,728")


def test_one_lws_replica_of_two_nodes_is_placed_on_both_and_serves(tmp_path: Path) -> None:
    """One replica of TP 8 x PP 2 needs two 8-GPU nodes: the predicting cluster has them (it had one node, the
    group was never placed and every request went unserved)."""
    one = tmp_path / "lws-one.yaml"
    one.write_text((DATA / "lws-vllm-gpu.yaml").read_text().replace("replicas: 2", "replicas: 1", 1))
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY.format(hardware="H100-SXM5-80GB"))
    report = validate(deploy, [one]).as_json()
    assert report["prediction"]["replicas"] == 1 and 0.0 < report["prediction"]["ttft_p99_s"] < 1.0


def test_how_each_format_was_read_is_said(tmp_path: Path) -> None:
    report = _validate(tmp_path, ["production-stack-values-02-basic-config.yaml"])
    assert [f["message"] for f in report["findings"] if f["check"] == "format"] == [
        f"{DATA / 'production-stack-values-02-basic-config.yaml'}#0: production-stack values, modelSpec llama3, "
        "read as the Deployment vllm-llama3-deployment-vllm the chart renders"
    ]
    gaudi = _validate(tmp_path, ["llm-d-modelservice-values-gaudi.yaml"])
    assert [(f["severity"], f["message"].split(": ", 1)[1]) for f in gaudi["findings"] if f["check"] == "format"] == [
        ("info", "llm-d ModelService values read as the decode Deployment vllm-decode the chart renders"),
        ("warning", "accelerator intel-gaudi (habana.ai/gaudi) is neither NVIDIA nor AMD: no profile"),
    ]
    abbreviated = [f["message"] for f in gaudi["findings"] if "--max-num-batched-token " in f["message"]]
    assert len(abbreviated) == 1 and "read by vLLM as --max-num-batched-tokens" in abbreviated[0]


def test_kserve_huggingface_runtime_on_s3_with_the_model_named(tmp_path: Path) -> None:
    files = ["kserve-fluid-isvc.yaml", "kserve-huggingfaceserver-runtime.yaml"]
    report = _validate(tmp_path, files, "A10G-24GB", "model: meta-llama/Llama-3.1-8B-Instruct\n")
    assert report["deployment"]["engine"] == {
        "max_model_len": 1024,
        "gpu_memory_utilization": 0.95,
        "enforce_eager": True,
    }
    formats = [(f["severity"], f["message"].split(": ", 1)[1]) for f in report["findings"] if f["check"] == "format"]
    assert formats[0] == (
        "warning",
        "InferenceService/llama-31-8b-instruct: minReplicas 0 scales to zero; predicted with 1 replica, "
        "cold starts aside",
    )
    assert formats[1][1].endswith("with the runtime ClusterServingRuntime/kserve-huggingfaceserver")
    # the model is named in the deployment file: no warning asking for it
    assert not [f for f in report["findings"] if "name it with `model:`" in f["message"]]
    # 1,000 + 100 tokens do not fit --max-model-len=1024: vLLM rejects every request
    # never served: no finite P99 ("inf", as summary.json writes it: JSON has no infinity)
    assert _checks(report, "error") == ["rejected", "slo"] and report["prediction"]["ttft_p99_s"] == "inf"
    (refused,) = [f for f in report["findings"] if f["check"] == "rejected"]
    assert refused["message"].endswith(
        "(100.0%) are refused by the engine, e.g. prompt 1000 + output 100 tokens exceed max_model_len 1024"
    )


# KServe's docs/samples/fluid/kserve-huggingfaceserver.yaml (@ aaac4e2), shortened: a bash wrapper that warms the
# model's files up, then runs huggingfaceserver with the words after the script ("$@")
WRAPPED_RUNTIME = """apiVersion: serving.kserve.io/v1alpha1
kind: ClusterServingRuntime
metadata: {name: custom-kserve-huggingfaceserver}
spec:
  containers:
  - image: kserve/huggingfaceserver:latest
    name: kserve-container
    command: ["/bin/bash"]
    args:
    - "-c"
    - |
      set -e
      TARGET_DIR="${TARGET_DIR:-/mnt/models}"
      for file in $(find "$TARGET_DIR" -type f); do
        dd if="$file" of=/dev/null bs=4M &
      done
      wait
      echo "All arguments: $@"
      LAST
    - "--"
    - --model_name={{.Name}}
  supportedModelFormats:
  - {autoSelect: true, name: huggingface}
"""


def _wrapped_runtime(tmp_path: Path, last_line: str) -> Path:
    path = tmp_path / "runtime.yaml"
    path.write_text(WRAPPED_RUNTIME.replace("LAST", last_line))
    return path


def test_kserve_runtime_wrapping_huggingfaceserver_in_bash_is_read_at_its_line(tmp_path: Path) -> None:
    """The fluid sample's runtime was refused naming the InferenceService's file and `containers.0.args.2`, quoting
    the whole script as 'several words passed to vLLM as one argument'."""
    runtime = _wrapped_runtime(tmp_path, 'python3 -m huggingfaceserver "$@"')
    documents = read_documents(DATA / "kserve-fluid-isvc.yaml") + read_documents(runtime)
    rendered = render_workloads(documents)
    ((_, made),) = rendered.documents
    (container,) = _pod(made)["containers"]
    assert container["command"] == ["vllm", "serve"]
    assert container["args"] == FLUID_VLLM_ARGS
    assert [f.message.split(": ", 1)[1] for f in rendered.findings][-1] == (
        "huggingfaceserver's own flags taken out, the rest read as vLLM's (backend vllm) (the line of the "
        "runtime's shell script that runs it)"
    )


def test_kserve_runtime_wrapper_without_a_server_line_names_the_runtime_file_and_field(tmp_path: Path) -> None:
    runtime = _wrapped_runtime(tmp_path, 'exec /opt/start-server.sh "$@"')
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY.format(hardware="A10G-24GB") + "model: meta-llama/Llama-3.1-8B-Instruct\n")
    result = run(
        "validate", str(deploy), "--manifest", str(DATA / "kserve-fluid-isvc.yaml"), "--manifest", str(runtime)
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {runtime}#0 ClusterServingRuntime/custom-kserve-huggingfaceserver: spec.containers.0.args.1: "
        "a shell-script wrapper ('set -e\\nTARGET_DIR=\"${TARGET_DIR:-/mnt/mo'...) is not read: no `python -m "
        "huggingfaceserver` line in it; run the server from command and args, or validate the Deployment KServe "
        "renders"
    )


def test_kserve_transformers_backend_is_a_named_unsupported_kind(tmp_path: Path) -> None:
    report = _validate(tmp_path, ["kserve-hf-isvc.yaml"])
    assert report["prediction"] is None
    assert report["findings"][0]["message"] == (
        f"{DATA / 'kserve-hf-isvc.yaml'}#0: KServe InferenceService/huggingface-llama2 runs Hugging Face "
        "transformers (--backend=huggingface), not vLLM: not modelled"
    )
    assert _checks(report, "error") == ["unsupported-kind", "unsupported-kind"]


BAD_VALUES = [
    ("servingEngineSpec: [1]\n", "servingEngineSpec: a mapping is expected, not list"),
    (
        "servingEngineSpec:\n  modelSpec:\n  - name: llama\n",
        "servingEngineSpec.modelSpec.0.modelURL: required by the chart (helm template refuses without it)",
    ),
    (
        "servingEngineSpec:\n  modelSpec:\n  - {name: llama, modelURL: m, repository: r, tag: t}\n",
        "servingEngineSpec.modelSpec.0.requestMemory: required by the chart (helm template refuses without it)",
    ),
    (
        "servingEngineSpec:\n  modelSpec:\n  - {name: llama, modelURL: m, repository: r, tag: t, resources: {},"
        " requestGPU: two}\n",
        "servingEngineSpec.modelSpec.0.requestGPU: a whole number >= 0 is expected, not 'two'",
    ),
    (
        "servingEngineSpec:\n  modelSpec:\n  - {name: a, modelURL: m, repository: r, tag: t, resources: {},"
        " vllmConfig: {extraArgs: [{x: 1}]}}\n",
        "servingEngineSpec.modelSpec.0.vllmConfig.extraArgs.0: a string is expected",
    ),
    (
        "servingEngineSpec:\n  modelSpec:\n  - {name: a, modelURL: m, repository: r, tag: t, requestMemory: 1Gi,"
        " requestCPU: 1, lmcacheConfig: {enabled: 'false'}}\n",
        "servingEngineSpec.modelSpec.0.lmcacheConfig.enabled: true or false is expected, not 'false' (quoted: a "
        "chart's `if` takes any non-empty string as true)",
    ),
    (
        "servingEngineSpec:\n  modelSpec:\n  - {name: a, modelURL: m, repository: r, tag: t, requestMemory: 1Gi,"
        " requestCPU: 1, enableLoRA: 1}\n",
        "servingEngineSpec.modelSpec.0.enableLoRA: true or false is expected, not 1",
    ),
    (
        "modelArtifacts: {name: m, uri: 'oci://registry/m'}\n",
        "modelArtifacts.uri: oci://registry/m: only hf:// and pvc+hf:// are read (which model?)",
    ),
    (
        "modelArtifacts: {uri: 'hf://m'}\ndecode: {containers: []}\n",
        "decode.containers: no container: nothing serves requests",
    ),
    (
        "modelArtifacts: {uri: 'hf://m'}\ndecode: {parallelism: {tensor: -2}, containers: [{name: v}]}\n",
        "decode.parallelism.tensor: a whole number >= 0 is expected, not -2",
    ),
]


@pytest.mark.parametrize(("values", "message"), BAD_VALUES)
def test_a_malformed_values_file_is_one_error_naming_the_field(tmp_path: Path, values: str, message: str) -> None:
    (tmp_path / "values.yaml").write_text(values)
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY.format(hardware="H100-SXM5-80GB"))
    with pytest.raises(InputError) as caught:
        validate(deploy, [tmp_path / "values.yaml"])
    assert caught.value.one_line() == f"{tmp_path / 'values.yaml'}#0: {message}"


def test_an_unknown_kind_alone_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "k8s.yaml").write_text("apiVersion: example.com/v1\nkind: ModelServer\nmetadata: {name: m}\n")
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY.format(hardware="H100-SXM5-80GB") + "manifests: [k8s.yaml]\n")
    result = run("validate", str(deploy))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {tmp_path / 'k8s.yaml'}: no Deployment, StatefulSet or LeaderWorkerSet with a vLLM container "
        "(vllm serve ...)"
    )


@pytest.mark.parametrize(
    ("file", "model", "preset"),
    [
        ("production-stack-values-01-minimal-amd-example.yaml", "facebook/opt-125m", "opt-125m"),
        ("llm-d-modelservice-values-pd.yaml", "facebook/opt-125m", "opt-125m"),
        ("kserve-llmisvc-single-gpu.yaml", "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8", "Qwen3-Coder-30B-A3B-Instruct"),
    ],
)
def test_a_public_example_of_a_model_without_a_preset_is_an_input_error(
    tmp_path: Path, file: str, model: str, preset: str
) -> None:
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY.format(hardware="H100-SXM5-80GB"))
    with pytest.raises(InputError) as caught:
        validate(deploy, [DATA / file])
    # the name came from the manifest's vllm command: the error is there, and says where to name a model instead
    assert caught.value.source.startswith(str(DATA / file)) and caught.value.field == "vllm serve"
    assert caught.value.message.startswith(f"unknown model '{model}': no preset for '{preset}'")
    assert caught.value.message.endswith(
        f"name the model in {deploy} (model: a Hugging Face id or a preset, ttftsim models)"
    )


# the fluid sample's runtime args and the model's, huggingfaceserver's own flags out, as `vllm serve` reads them
FLUID_VLLM_ARGS = [
    "/mnt/models",
    "--gpu-memory-utilization=0.95",
    "--max-model-len=1024",
    "--tensor-parallel-size=1",
    "--enforce-eager",
    "--disable-log-stats",
    "--port",
    "8080",
]


def _made(file: str, *more: str) -> list[dict[str, Any]]:
    """The workloads the readers make from vendored files (their documents, read as validate reads them)."""
    documents = [d for f in (file, *more) for d in read_documents(DATA / f)]
    rendered = render_workloads(documents)
    return [document for _, document in rendered.documents]


def _pod(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]
    template = spec["leaderWorkerTemplate"]["leaderTemplate"] if "leaderWorkerTemplate" in spec else spec["template"]
    return dict(template["spec"])


def test_kserve_merges_the_runtime_and_the_model_as_its_controller_does() -> None:
    (made,) = _made("kserve-fluid-isvc.yaml", "kserve-huggingfaceserver-runtime.yaml")
    assert made["metadata"]["name"] == "llama-31-8b-instruct-predictor" and made["spec"]["replicas"] == 1
    pod = _pod(made)
    (container,) = pod["containers"]
    # runtime args (--model_name={{.Name}}) then the model's; huggingfaceserver's own flags out; no hf:// model;
    # the port its HTTP server listens on (--http_port, 8080)
    assert container["command"] == ["vllm", "serve"]
    assert container["args"] == FLUID_VLLM_ARGS
    # KServe's default readiness probe (setDefaultPodSpec): TCP on the first port
    assert container["readinessProbe"] == {"tcpSocket": {"port": 8080}, "periodSeconds": 10, "failureThreshold": 3}
    # the model's resources over the runtime's (cpu "1" -> "24"), the runtime's env and /dev/shm kept
    assert container["resources"]["limits"] == {"cpu": "24", "memory": "48Gi", "nvidia.com/gpu": "1"}
    assert [e["name"] for e in container["env"]] == ["LMCACHE_USE_EXPERIMENTAL"]
    assert container["volumeMounts"] == [{"name": "devshm", "mountPath": "/dev/shm"}]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "g5.8xlarge"}
    assert pod["volumes"] == [{"name": "devshm", "emptyDir": {"medium": "Memory"}}]


@pytest.mark.parametrize(
    ("file", "path", "wrong", "field"),
    [
        (
            "kserve-hf-isvc.yaml",
            ("spec", "predictor", "model", "resources", "limits", "nvidia.com/gpu"),
            "one",
            "spec.predictor.model.resources.limits.nvidia.com/gpu",
        ),
        (
            "kserve-hf-isvc.yaml",
            ("spec", "predictor", "nodeSelector"),
            {"gpu": ["a"]},
            "spec.predictor.nodeSelector.gpu",
        ),
        (
            "kserve-llmisvc-single-gpu.yaml",
            ("spec", "template", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
            "one",
            "spec.template.containers.0.resources.limits.nvidia.com/gpu",
        ),
    ],
)
def test_a_kserve_field_of_the_wrong_type_is_named_where_the_file_has_it(
    file: str, path: tuple[Any, ...], wrong: object, field: str
) -> None:
    """Not where the Deployment made of it has it (spec.template.spec.containers.0...): found by a new user."""
    (document,) = yaml.safe_load_all((DATA / file).read_text())
    node = document
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = wrong
    with pytest.raises(InputError) as caught:
        render_workloads([(f"{file}#0", document)])
    assert caught.value.field == field


def test_llm_inference_service_runs_the_template_command_with_its_additional_args() -> None:
    (made,) = _made("kserve-llmisvc-single-gpu.yaml")
    assert made["metadata"]["name"] == "qwen3-coder-tool-calling-kserve"
    (container,) = _pod(made)["containers"]
    assert container["command"] == [
        "vllm",
        "serve",
        "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8",
        "--port",
        "8000",
        "--enable-auto-tool-choice",
        "--tool-call-parser=qwen3_coder",
        "--enable-log-requests",
        "--enable-log-outputs",
    ]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    # the template's shell consumed VLLM_ADDITIONAL_ARGS (not vLLM's variable: no warning that vLLM ignores it);
    # its probes on /health:8000 and its in-memory /dev/shm are the pod's (config-llm-template.yaml)
    assert [e["name"] for e in container["env"]] == ["HF_TOKEN"]
    assert container["startupProbe"]["failureThreshold"] == 60 and container["readinessProbe"]["periodSeconds"] == 5
    assert container["volumeMounts"] == [{"name": "dshm", "mountPath": "/dev/shm"}]
    assert _pod(made)["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]


def test_production_stack_lmcache_config_renders_the_connector_and_its_tiers() -> None:
    """lmcacheConfig as the chart renders it (deployment-vllm-multi.yaml): the connector flag, the CPU tier's
    LMCACHE_* variables; read by validate as LMCache's settings. With prefix caching off (the chart's CPU-offloading
    tutorial) vLLM runs it, ttftsim leaves the tier out of the prediction and says so."""
    from ttftsim.validate.formats import render_workloads
    from ttftsim.validate.vllm_command import read_vllm_container

    spec = {"name": "m", "modelURL": "meta-llama/Llama-3.1-8B-Instruct", "repository": "lmcache/vllm-openai"}
    spec |= {"tag": "v0.15.1", "requestCPU": 8, "requestMemory": "32Gi", "requestGPU": 1}
    spec["lmcacheConfig"] = {"enabled": True, "cpuOffloadingBufferSize": "20"}
    for caching in (True, False):
        spec["vllmConfig"] = {"enablePrefixCaching": caching}
        rendered = render_workloads([("values.yaml#0", {"servingEngineSpec": {"modelSpec": [spec]}})])
        ((_, made),) = rendered.documents
        (container,) = _pod(made)["containers"]
        assert container["command"][-2:] == [
            "--kv-transfer-config",
            '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}',
        ]
        env = {e["name"]: e["value"] for e in container["env"]}
        assert (env["LMCACHE_LOCAL_CPU"], env["LMCACHE_MAX_LOCAL_CPU_SIZE"]) == ("True", "20")
        command = read_vllm_container(container["command"], container["env"], "0.15.1", "Deployment/m", "values.yaml")
        if caching:
            assert command.engine["lmcache"] == {"local_cpu": True, "max_local_cpu_size": 20.0}
        else:
            assert "kv_transfer_config" not in command.engine
            assert any("LMCache (--kv-transfer-config) with prefix caching off" in f.message for f in command.findings)


def test_production_stack_config_keys_the_chart_does_not_read_are_warnings() -> None:
    """helm renders a misspelt vllmConfig key into nothing: a warning naming it and the nearest key the chart reads."""
    from ttftsim.validate.formats import render_workloads

    spec = {"name": "m", "modelURL": "meta-llama/Llama-3.1-8B-Instruct", "repository": "vllm/vllm-openai"}
    spec |= {"tag": "v0.15.1", "requestCPU": 8, "requestMemory": "32Gi", "requestGPU": 1}
    spec["vllmConfig"] = {"maxModelLength": 16384, "maxNumSeqs": 64}
    values = {"servingEngineSpec": {"modelSpec": [spec]}}
    rendered = render_workloads([("values.yaml#0", values)])
    warnings = [f.message for f in rendered.findings if f.severity == "warning"]
    assert warnings == [
        "values.yaml#0: modelSpec m: vllmConfig.maxModelLength is not a key the chart reads (did you mean "
        "maxModelLen?): helm ignores it"
    ]
    assert "--max-num-seqs" in rendered.documents[0][1]["spec"]["template"]["spec"]["containers"][0]["command"]


def test_production_stack_keys_the_chart_does_not_read_are_warnings_with_the_nearest_key() -> None:
    """helm renders a misspelt modelSpec or top-level key into nothing and the chart's default stands (found by a
    new user: validate passed with the defaults): a warning naming it and the nearest key, case aside. Every key of
    the chart's values schema is one the reader knows."""
    import json

    from ttftsim.validate.stack_values_keys import MODEL_SPEC_KEYS, TOP_LEVEL_KEYS

    values = yaml.safe_load((DATA / "production-stack-values-02-basic-config.yaml").read_text())
    spec = values["servingEngineSpec"]["modelSpec"][0]
    spec["vllmconfig"], spec["requestGpu"] = spec.pop("vllmConfig"), spec.pop("requestGPU")
    values["routerspec"] = {}
    rendered = render_workloads([("values.yaml#0", values)])
    assert [f.message for f in rendered.findings if f.severity == "warning"] == [
        "values.yaml#0: routerspec is not a key the chart reads (did you mean routerSpec?): helm ignores it",
        "values.yaml#0: modelSpec llama3: requestGpu is not a key the chart reads (did you mean requestGPU?): helm "
        "ignores it",
        "values.yaml#0: modelSpec llama3: vllmconfig is not a key the chart reads (did you mean vllmConfig?): helm "
        "ignores it",
    ]
    schema = json.loads((DATA.parent / "crds" / "production-stack-values.schema.json").read_text())
    model_spec = schema["properties"]["servingEngineSpec"]["properties"]["modelSpec"]["items"]["properties"]
    assert set(schema["properties"]) <= TOP_LEVEL_KEYS and set(model_spec) <= MODEL_SPEC_KEYS


def test_production_stack_amd_values_request_amd_gpus_with_the_charts_probes() -> None:
    (made,) = _made("production-stack-values-01-minimal-amd-example.yaml")
    assert made["metadata"]["name"] == "vllm-opt125m-deployment-vllm"
    pod = _pod(made)
    (container,) = pod["containers"]
    assert container["image"] == "rocm/vllm:instinct_main"
    assert container["command"] == ["vllm", "serve", "facebook/opt-125m", "--host", "0.0.0.0", "--port", "8000"]
    assert container["resources"] == {
        "requests": {"memory": "16Gi", "cpu": "6", "amd.com/gpu": 1},
        "limits": {"amd.com/gpu": 1},
    }
    assert container["startupProbe"] == {"initialDelaySeconds": 15, "periodSeconds": 10, "failureThreshold": 60}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["key"] == "your-node-label"
    assert "volumes" not in pod  # no tensorParallelSize: the chart mounts no /dev/shm


def test_llm_d_values_run_vllm_serve_with_one_gpu_per_tensor_rank() -> None:
    (made,) = _made("llm-d-modelservice-values-pd.yaml")
    assert made["kind"] == "Deployment" and made["metadata"]["name"] == "vllm-decode"
    (container,) = _pod(made)["containers"]
    assert container["command"] == ["vllm", "serve"]
    assert container["args"] == [
        "facebook/opt-125m",
        "--port",
        "8000",
        "--served-model-name",
        "facebook/opt-125m",
        "--enforce-eager",
        "--kv-transfer-config",
        '{"kv_connector":"NixlConnector", "kv_role":"kv_both"}',
    ]
    # parallelism unset: tensor 1 x dataLocal 1 = 1 device, added to the container's own limits
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1, "memory": "16Gi", "cpu": "16"}


def test_llm_d_multinode_values_are_a_leader_worker_set(tmp_path: Path) -> None:
    values = (
        "multinode: true\nmodelArtifacts: {name: meta-llama/Llama-3.1-405B-Instruct, uri: 'hf://meta-llama/Llama-3.1-405B-Instruct'}\n"
        "decode:\n  replicas: 2\n  parallelism: {tensor: 8, workers: 2}\n"
        "  containers: [{name: vllm, modelCommand: vllmServe, args: ['--pipeline-parallel-size', '2']}]\n"
    )
    (tmp_path / "values.yaml").write_text(values)
    (made,) = [d for _, d in render_workloads(read_documents(tmp_path / "values.yaml")).documents]
    assert made["kind"] == "LeaderWorkerSet" and made["spec"]["replicas"] == 2
    assert made["spec"]["leaderWorkerTemplate"]["size"] == 2
    (container,) = _pod(made)["containers"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 8}, "requests": {"nvidia.com/gpu": 8}}
    assert container["args"][3:5] == ["--tensor-parallel-size", "8"]


LLM_D_DATA_PARALLEL = (
    "multinode: true\nmodelArtifacts: {name: Qwen/Qwen3-30B-A3B, uri: 'hf://Qwen/Qwen3-30B-A3B'}\n"
    "decode:\n  parallelism: {tensor: 2, data: 4, dataLocal: 2}\n"
    "  acceleratorTypes: {labelKey: nvidia.com/gpu.product, labelValues: [NVIDIA-H100-80GB-HBM3]}\n"
    "  containers: [{name: vllm, image: vllm/vllm-openai:v0.15.1, modelCommand: vllmServe,\n"
    "    args: [--enable-expert-parallel], resources: {limits: {cpu: '16', memory: 256Gi}}}]\n"
)


def test_llm_d_multinode_data_parallelism_is_written_as_the_chart_writes_it(tmp_path: Path) -> None:
    """parallelism data 4, dataLocal 2 over a multinode LeaderWorkerSet: vllmServeModelCommand writes
    --data-parallel-size 4 as well as --data-parallel-size-local 2, and numWorkers (no `workers`) is data / dataLocal
    = 2 pods of dataLocal x tensor = 4 GPUs; validate predicts DP 4 of TP 2, matching the group's 8 GPUs."""
    (tmp_path / "values.yaml").write_text(LLM_D_DATA_PARALLEL)
    (made,) = [d for _, d in render_workloads(read_documents(tmp_path / "values.yaml")).documents]
    assert made["kind"] == "LeaderWorkerSet" and made["spec"]["leaderWorkerTemplate"]["size"] == 2
    (container,) = _pod(made)["containers"]
    assert container["command"] == ["vllm", "serve"]
    assert container["args"] == [
        "Qwen/Qwen3-30B-A3B",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "2",
        "--data-parallel-size",
        "4",
        "--data-parallel-size-local",
        "2",
        "--served-model-name",
        "Qwen/Qwen3-30B-A3B",
        "--enable-expert-parallel",
    ]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 4
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY.format(hardware="H100-SXM5-80GB"))
    report = validate(deploy, [tmp_path / "values.yaml"]).as_json()
    engine = report["deployment"]["engine"]
    assert (engine["tensor_parallel_size"], engine["data_parallel_size"]) == (2, 4)
    assert [f["message"] for f in report["findings"] if f["check"] in ("tp-vs-gpus", "gpu-request")] == []


def test_llm_d_workers_not_dividing_data_local_fails_only_where_the_chart_counts_workers(tmp_path: Path) -> None:
    """numWorkers (data / dataLocal without `workers`) is included by the LeaderWorkerSet template alone: a
    multinode chart fails on data 6, dataLocal 4; a Deployment renders (DP 6, 4 of them local)."""
    values = LLM_D_DATA_PARALLEL.replace("{tensor: 2, data: 4, dataLocal: 2}", "{data: 6, dataLocal: 4}")
    (tmp_path / "values.yaml").write_text(values)
    with pytest.raises(InputError) as caught:
        render_workloads(read_documents(tmp_path / "values.yaml"))
    assert caught.value.one_line() == (
        f"{tmp_path / 'values.yaml'}#0: decode.parallelism.data: 6 is not a multiple of dataLocal (4): "
        "helm template fails"
    )
    (tmp_path / "values.yaml").write_text(values.replace("multinode: true", "multinode: false"))
    (made,) = [d for _, d in render_workloads(read_documents(tmp_path / "values.yaml")).documents]
    (container,) = _pod(made)["containers"]
    assert made["kind"] == "Deployment" and container["args"][3:7] == [
        "--data-parallel-size",
        "6",
        "--data-parallel-size-local",
        "4",
    ]


LLM_D_CUSTOM = (
    "modelArtifacts: {name: Qwen/Qwen3-32B, uri: 'hf://Qwen/Qwen3-32B'}\n"
    "decode:\n  parallelism: PARALLELISM\n"
    "  containers:\n  - name: vllm\n    modelCommand: custom\n    command: [/bin/bash, -c]\n"
    "    args: ['vllm serve Qwen/Qwen3-32B --tensor-parallel-size $TP_SIZE --gpu-memory-utilization=0.95']\n"
    "    env: [{name: TP_SIZE, value: '8'}, {name: HF_HOME, value: /cache}]\n"
)


def test_llm_d_gives_every_container_the_charts_parallelism_env(tmp_path: Path) -> None:
    """The chart's parallelismEnv follows the user's env, so its TP_SIZE wins, and a custom script's $TP_SIZE is
    read (the llm-d inference-scheduling GKE guide runs `vllm serve ... --tensor-parallel-size $TP_SIZE`)."""
    (tmp_path / "values.yaml").write_text(LLM_D_CUSTOM.replace("PARALLELISM", "{tensor: 2, data: 1}"))
    (made,) = [d for _, d in render_workloads(read_documents(tmp_path / "values.yaml")).documents]
    (container,) = _pod(made)["containers"]
    assert container["env"] == [
        {"name": "TP_SIZE", "value": "8"},
        {"name": "HF_HOME", "value": "/cache"},
        {"name": "DP_SIZE", "value": "1"},
        {"name": "TP_SIZE", "value": "2"},
        {"name": "DP_SIZE_LOCAL", "value": "1"},
    ]
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY.format(hardware="H100-SXM5-80GB"))
    report = validate(deploy, [tmp_path / "values.yaml"]).as_json()
    assert report["deployment"]["engine"] == {"tensor_parallel_size": 2, "gpu_memory_utilization": 0.95}
    assert _checks(report, "error") == []


@pytest.mark.parametrize(
    ("parallelism", "sizes"),
    [
        ("{}", ("1", "1", "1")),
        ("{data: 4, workers: 2}", ("4", "1", "2")),  # dataLocal = data / workers
        ("{dataLocal: 2, workers: 3, tensor: 4}", ("6", "4", "2")),  # data = dataLocal x workers
        ("{data: 8, dataLocal: 2}", ("8", "1", "2")),
    ],
)
def test_llm_d_parallelism_env_follows_the_charts_helpers(
    tmp_path: Path, parallelism: str, sizes: tuple[str, str, str]
) -> None:
    (tmp_path / "values.yaml").write_text(LLM_D_CUSTOM.replace("PARALLELISM", parallelism))
    (made,) = [d for _, d in render_workloads(read_documents(tmp_path / "values.yaml")).documents]
    (container,) = _pod(made)["containers"]
    assert tuple(e["value"] for e in container["env"][2:]) == sizes


def test_llm_d_data_not_a_multiple_of_workers_is_refused_as_helm_refuses_it(tmp_path: Path) -> None:
    (tmp_path / "values.yaml").write_text(LLM_D_CUSTOM.replace("PARALLELISM", "{data: 3, workers: 2}"))
    with pytest.raises(InputError) as caught:
        render_workloads(read_documents(tmp_path / "values.yaml"))
    assert caught.value.one_line() == (
        f"{tmp_path / 'values.yaml'}#0: decode.parallelism.data: 3 is not a multiple of workers (2): "
        "helm template fails"
    )


@pytest.mark.parametrize("emit", [production_stack_values, kserve_inference_service])
def test_what_plan_emits_for_the_charts_validate_reads_back(tmp_path: Path, emit: Any) -> None:
    """`ttftsim plan --emit`'s production-stack values and KServe InferenceService, read back by validate: the
    engine arguments the plan chose (TP 2, fp8, prefix caching...) are the ones predicted."""
    spec = make_spec(cand=make_candidate(tp=2, quantization="fp8"))
    (tmp_path / "emitted.yaml").write_text(yaml.safe_dump(emit(spec)))
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY.format(hardware="H100-SXM5-80GB"))
    report = validate(deploy, [tmp_path / "emitted.yaml"]).as_json()
    engine = report["deployment"]["engine"]
    assert (engine["tensor_parallel_size"], engine["quantization"], engine["max_model_len"]) == (2, "fp8", 8192)
    assert report["deployment"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert [f["check"] for f in report["findings"] if f["check"] in ("tp-vs-gpus", "gpu-request")] == []
    assert report["prediction"] is not None


def test_production_stack_with_two_engines_says_which_one_is_checked(tmp_path: Path) -> None:
    values = (
        "servingEngineSpec:\n  modelSpec:\n"
        "  - {name: llama, modelURL: meta-llama/Llama-3.1-8B-Instruct, repository: vllm/vllm-openai, tag: v0.15.1,\n"
        "     requestCPU: 8, requestMemory: 32Gi, requestGPU: 1}\n"
        "  - {name: qwen, modelURL: Qwen/Qwen2.5-7B-Instruct, repository: vllm/vllm-openai, tag: v0.15.1,\n"
        "     requestCPU: 8, requestMemory: 32Gi, requestGPU: 1}\n"
    )
    (tmp_path / "values.yaml").write_text(values)
    rendered = render_workloads(read_documents(tmp_path / "values.yaml"))
    assert [d["metadata"]["name"] for _, d in rendered.documents] == [
        "vllm-llama-deployment-vllm",
        "vllm-qwen-deployment-vllm",
    ]
    assert rendered.findings[-1].message == (
        f"{tmp_path / 'values.yaml'}#0: 2 engines (vllm-llama-deployment-vllm, vllm-qwen-deployment-vllm); "
        "validate checks and predicts the first"
    )


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    children: list[tuple[Any, Any]] = []
    if isinstance(node, dict):
        children = list(node.items())
    elif isinstance(node, list):
        children = list(enumerate(node))
    return [prefix] + [p for key, value in children for p in _paths(value, (*prefix, key))]


@pytest.mark.parametrize(
    "file",
    [
        "kserve-fluid-isvc.yaml",
        "kserve-llmisvc-single-gpu.yaml",
        "production-stack-values-25-v100-multi-gpu-tp2.yaml",
        "llm-d-modelservice-values-gaudi.yaml",
    ],
)
def test_any_field_of_the_wrong_type_is_an_input_error_never_an_exception(tmp_path: Path, file: str) -> None:
    """Every field of a KServe resource or values file replaced by a list, a mapping, a number and a string:
    reading it makes workloads or raises InputError (validate's one line), nothing else."""
    original = yaml.safe_load((DATA / file).read_text())
    runtime = (DATA / "kserve-huggingfaceserver-runtime.yaml").read_text()
    for path in _paths(original)[1:]:
        for wrong in ([1], {"a": 1}, 7, "x"):
            document = yaml.safe_load((DATA / file).read_text())
            node = document
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = wrong
            (tmp_path / "m.yaml").write_text(yaml.safe_dump(document) + "---\n" + runtime)
            try:
                documents = read_documents(tmp_path / "m.yaml")
                find_serving(documents + render_workloads(documents).documents)
            except InputError:  # NoServingWorkloadError included
                continue


def test_a_knative_service_is_read_as_its_revisions_deployment() -> None:
    """min-scale on the template is the replicas (Knative's default 0 scales to zero: a warning, predicted with 1);
    the user port is the declared one, else 8080, with Knative's TCP readiness probe on it."""
    from ttftsim.validate.formats import render_workloads

    container = {"image": "vllm/vllm-openai:v0.15.1", "args": ["meta-llama/Llama-3.1-8B-Instruct"]}
    template = {"metadata": {"annotations": {"autoscaling.knative.dev/min-scale": "2"}}, "spec": {}}
    template["spec"]["containers"] = [container]
    service = {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "chat"}}
    rendered = render_workloads([("k.yaml#0", service | {"spec": {"template": template}})])
    ((_, made),) = rendered.documents
    assert (made["metadata"]["name"], made["spec"]["replicas"]) == ("chat-00001-deployment", 2)
    (user,) = _pod(made)["containers"]
    assert user["ports"] == [{"containerPort": 8080}]
    assert user["readinessProbe"] == {"tcpSocket": {"port": 8080}, "periodSeconds": 10, "failureThreshold": 3}
    del template["metadata"]
    rendered = render_workloads([("k.yaml#0", service | {"spec": {"template": template}})])
    ((_, made),) = rendered.documents
    assert made["spec"]["replicas"] == 1
    assert any("min-scale 0" in f.message and f.severity == "warning" for f in rendered.findings)


def test_kserve_gives_its_default_readiness_probe_to_the_predictor_container_only() -> None:
    from ttftsim.validate.formats import render_workloads

    def containers(*names: str) -> list[dict[str, Any]]:
        listed = [{"name": n, "image": "vllm/vllm-openai:v0.15.1"} for n in names]
        spec = {"predictor": {"containers": listed}}
        isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "s"}}
        ((_, made),) = render_workloads([("i.yaml#0", isvc | {"spec": spec})]).documents
        return list(_pod(made)["containers"])

    (alone,) = containers("vllm")  # a lone container is the predictor's (CustomPredictor.Default names it)
    assert alone["readinessProbe"]["tcpSocket"] == {"port": 8080}
    assert [c.get("readinessProbe") for c in containers("vllm", "log-shipper")] == [None, None]


def test_a_knative_vllm_container_without_a_port_is_never_reached() -> None:
    from ttftsim.validate.formats import render_workloads

    container = {"image": "vllm/vllm-openai:v0.15.1", "args": ["meta-llama/Llama-3.1-8B-Instruct"]}
    service = {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "chat"}}
    for ports, errors in (([], 1), ([{"containerPort": 8000}], 0)):
        spec = {"template": {"spec": {"containers": [container | ({"ports": ports} if ports else {})]}}}
        rendered = render_workloads([("k.yaml#0", service | {"spec": spec})])
        found = [f for f in rendered.findings if f.severity == "error"]
        assert len(found) == errors
        assert all("Knative sends requests and its readiness probe to 8080" in f.message for f in found)


def test_llm_inference_service_merges_the_users_probe_and_ports_into_the_templates() -> None:
    # a strategic merge (KServe config_merge.go): a probe field by field, ports by containerPort
    from ttftsim.validate.kserve import _merged_template

    merged = _merged_template({"readinessProbe": {"initialDelaySeconds": 120}, "ports": [{"containerPort": 9090}]})
    assert merged["readinessProbe"] == {"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 5} | {
        "failureThreshold": 3,
        "initialDelaySeconds": 120,
    }
    assert merged["ports"] == [{"containerPort": 8000}, {"containerPort": 9090}]


@pytest.mark.parametrize(("size", "tier"), [("20", "20"), (2.5, "2.5"), ("0", None), ("abc", None), (-5, None)])
def test_production_stack_cpu_tier_follows_the_charts_int_test(size: object, tier: str | None) -> None:
    from ttftsim.validate.formats import render_workloads

    spec = {"name": "m", "modelURL": "meta-llama/Llama-3.1-8B-Instruct", "repository": "lmcache/vllm-openai"}
    spec |= {"tag": "v0.15.1", "requestCPU": 8, "requestMemory": "32Gi", "requestGPU": 1}
    spec["lmcacheConfig"] = {"enabled": True, "cpuOffloadingBufferSize": size}
    ((_, made),) = render_workloads([("v.yaml#0", {"servingEngineSpec": {"modelSpec": [spec]}})]).documents
    (container,) = _pod(made)["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env.get("LMCACHE_MAX_LOCAL_CPU_SIZE") == tier


def test_llm_inference_service_data_and_expert_parallelism_run_the_data_parallel_template() -> None:
    """spec.parallelism data 16, dataLocal 8, expert, with workers (KServe's DeepSeek DP/EP sample): the
    data-parallel template's flags (config-llm-worker-data-parallel.yaml) and a group of 16 / 8 = 2 pods of 8 GPUs
    each; VLLM_API_SERVER_COUNT is the template's variable, not vLLM's (a cold trial was told to remove it, and to
    set TP 8 over the GPUs it saw idle). Without a worker KServe runs the single-node template (a cold review)."""
    document = yaml.safe_load((DATA / "kserve-llmisvc-single-gpu.yaml").read_text())
    document["spec"]["parallelism"] = {"data": 16, "dataLocal": 8, "expert": True, "tensor": 1}
    document["spec"]["worker"] = {"containers": [{"name": "main"}]}
    main = document["spec"]["template"]["containers"][0]
    main["env"] = [*main.get("env", []), {"name": "VLLM_API_SERVER_COUNT", "value": "1"}]
    ((_, made),) = render_workloads([("isvc.yaml#0", document)]).documents
    assert made["kind"] == "LeaderWorkerSet" and made["spec"]["leaderWorkerTemplate"]["size"] == 2
    (container,) = _pod(made)["containers"]
    assert container["command"][5:16] == [
        "--tensor-parallel-size",
        "1",
        "--api-server-count",
        "1",
        "--enable-expert-parallel",
        "--data-parallel-size",
        "16",
        "--data-parallel-size-local",
        "8",
        "--enable-auto-tool-choice",
        "--tool-call-parser=qwen3_coder",
    ]
    assert "VLLM_API_SERVER_COUNT" not in [e["name"] for e in container["env"]]
    del document["spec"]["worker"]  # the single-node template: no data-parallel flags, whatever parallelism says
    ((_, made),) = render_workloads([("isvc.yaml#0", document)]).documents
    (container,) = _pod(made)["containers"]
    assert made["kind"] == "Deployment" and container["command"][5:9] == [
        "--tensor-parallel-size",
        "1",
        "--enable-auto-tool-choice",
        "--tool-call-parser=qwen3_coder",
    ]
