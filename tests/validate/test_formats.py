"""`ttftsim validate` on public manifests and chart values (tests/data/manifests/, sources in its README):
each gives a prediction or a named unsupported-kind finding, with the findings each must give asserted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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
        {"max_model_len": 8000, "gpu_memory_utilization": 0.9},  # enablePrefixCaching true: vLLM's default
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
    assert kv[0].endswith("tokens on 8 x H100-SXM5-80GB; max_model_len x max_num_seqs = 134,217,728")


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
    # 1,000 + 100 tokens do not fit --max-model-len=1024: vLLM rejects every request
    assert _checks(report, "error") == ["slo"] and report["prediction"]["ttft_p99_s"] == float("inf")


def test_kserve_transformers_backend_is_a_named_unsupported_kind(tmp_path: Path) -> None:
    report = _validate(tmp_path, ["kserve-hf-isvc.yaml"])
    assert report["prediction"] is None
    assert report["findings"][0]["message"] == (
        f"{DATA / 'kserve-hf-isvc.yaml'}#0: KServe InferenceService/huggingface-llama2 runs Hugging Face "
        "transformers (--backend=huggingface), not vLLM: not modelled"
    )
    assert _checks(report, "error") == ["unsupported-kind", "unsupported-kind"]
