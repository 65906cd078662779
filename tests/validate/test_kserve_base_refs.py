"""A KServe LLMInferenceService's spec.baseRefs merged as KServe's controller merges them
(validate/kserve_base_refs.py): the configs in the order listed, then the service's own spec, each a strategic
merge over those before; a config the files do not hold is one input error naming the file and the entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ttftsim.errors import InputError
from ttftsim.validate.formats import render_workloads
from ttftsim.validate.kserve_base_refs import strategic_merge
from ttftsim.validate.manifests import read_documents
from ttftsim.validate.run import validate

DEPLOY = """name: base-refs
hardware: H100-SXM5-80GB
vllm_version: 0.33.0
traffic:
  type: synthetic
  arrivals: {type: poisson, rate: 2}
  prompt_tokens: {type: fixed, value: 1000}
  output_tokens: {type: fixed, value: 100}
  duration_s: 30
slo:
  ttft_p99_s: 1.0
"""
SERVICE = """apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {name: chat, namespace: team}
spec:
  model: {uri: "hf://Qwen/Qwen2.5-7B-Instruct", name: Qwen/Qwen2.5-7B-Instruct}
  replicas: 3
  baseRefs: [{name: tp-two}, {name: short-context}]
  template:
    containers:
    - name: main
      env: [{name: VLLM_ADDITIONAL_ARGS, value: "--max-num-seqs 64"}]
      resources: {limits: {nvidia.com/gpu: "2", cpu: "8"}}
"""
TP_TWO = """apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceServiceConfig
metadata: {name: tp-two, namespace: team}
spec:
  replicas: 1
  parallelism: {tensor: 2}
  template:
    containers:
    - name: main
      args: [--max-model-len, "8192"]
      env: [{name: VLLM_ADDITIONAL_ARGS, value: "--max-num-seqs 8"}]
      resources: {limits: {memory: 64Gi}}
"""
SHORT_CONTEXT = """apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceServiceConfig
metadata: {name: short-context}
spec:
  template:
    containers:
    - name: main
      args: [--max-model-len, "4096"]
"""


def _files(tmp_path: Path, **files: str) -> list[Path]:
    paths = []
    for name, text in files.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        paths.append(tmp_path / f"{name}.yaml")
    return paths


def _main(paths: list[Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The workload made and its main container."""
    documents = [d for path in paths for d in read_documents(path)]
    ((_, made),) = render_workloads(documents).documents
    (main,) = made["spec"]["template"]["spec"]["containers"]
    return made, main


def test_the_configs_merge_in_order_under_the_services_own_spec(tmp_path: Path) -> None:
    """tp-two's parallelism and memory limit stay; short-context's args replace tp-two's (a later baseRef
    overrides an earlier one); the service's replicas, env value and limits win over both."""
    paths = _files(tmp_path, service=SERVICE, tp=TP_TWO, short=SHORT_CONTEXT)
    made, main = _main(paths)
    assert made["spec"]["replicas"] == 3
    assert main["command"] == [
        "vllm",
        "serve",
        "Qwen/Qwen2.5-7B-Instruct",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "2",
        "--max-num-seqs",
        "64",
        "--max-model-len",
        "4096",
    ]
    assert main["resources"] == {"limits": {"memory": "64Gi", "nvidia.com/gpu": "2", "cpu": "8"}}
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY)
    report = validate(deploy, paths).as_json()
    engine = report["deployment"]["engine"]
    assert (engine["tensor_parallel_size"], engine["max_num_seqs"], engine["max_model_len"]) == (2, 64, 4096)
    assert report["deployment"]["replicas"] == 3


def test_a_configs_own_command_replaces_the_template_and_runs_as_written(tmp_path: Path) -> None:
    """KServe's e2e-gpt-oss sample: the config's `sh -c` script runs `vllm serve /mnt/models ... $VLLM_ADDITIONAL_ARGS`
    (the template's command is replaced whole); /mnt/models is the service's model, the variable its env's value."""
    config = SHORT_CONTEXT.replace(
        'args: [--max-model-len, "4096"]',
        "command: [/bin/sh, -c]\n"
        '      args: ["vllm serve /mnt/models --port 8000 --block-size 64 $VLLM_ADDITIONAL_ARGS"]',
    )
    service = SERVICE.replace("[{name: tp-two}, {name: short-context}]", "[{name: short-context}]")
    paths = _files(tmp_path, service=service, short=config)
    _, main = _main(paths)
    assert main["command"] == ["/bin/sh", "-c"]
    assert main["args"] == ["vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000 --block-size 64 --max-num-seqs 64"]
    deploy = tmp_path / "deploy.yaml"
    deploy.write_text(DEPLOY)
    report = validate(deploy, paths).as_json()
    assert report["deployment"]["engine"] == {"vllm_version": "0.33.0", "block_size": 64, "max_num_seqs": 64}
    assert report["deployment"]["model"] == "Qwen/Qwen2.5-7B-Instruct"


def test_a_base_ref_not_in_the_files_is_one_line_naming_the_file_and_entry(tmp_path: Path) -> None:
    (service,) = _files(tmp_path, service=SERVICE)
    tp_two = _files(tmp_path, tp=TP_TWO)
    with pytest.raises(InputError) as caught:
        _main([service, *tp_two])
    assert caught.value.one_line() == (
        f"{service}#0: spec.baseRefs.1: LLMInferenceServiceConfig 'short-context' is not in the files: KServe "
        "merges its spec into LLMInferenceService/chat, so what runs cannot be read without it; give the file "
        "that defines it with --manifest"
    )


def test_a_config_is_looked_up_in_the_services_namespace_then_kserves(tmp_path: Path) -> None:
    """getConfig: the service's namespace first, then `kserve`; a config in another namespace is not found."""
    elsewhere = TP_TWO.replace("namespace: team", "namespace: other")
    in_kserve = TP_TWO.replace("namespace: team", "namespace: kserve").replace("tensor: 2", "tensor: 4")
    service = SERVICE.replace("[{name: tp-two}, {name: short-context}]", "[{name: tp-two}]")
    _, main = _main(_files(tmp_path, service=service, kserve=in_kserve, team=TP_TWO))
    assert main["command"][5:7] == ["--tensor-parallel-size", "2"]
    _, main = _main(_files(tmp_path, service=service, kserve=in_kserve, team=elsewhere))
    assert main["command"][5:7] == ["--tensor-parallel-size", "4"]
    (path,) = _files(tmp_path, team=elsewhere)
    with pytest.raises(InputError) as caught:
        _main([tmp_path / "service.yaml", path])
    assert caught.value.one_line().startswith(
        f"{tmp_path / 'service.yaml'}#0: spec.baseRefs.0: LLMInferenceServiceConfig 'tp-two' is not in the files"
    )


def test_the_strategic_merge_follows_core_v1s_patch_keys() -> None:
    """Containers and env by name, ports by containerPort, mounts by mountPath, a volume's source replaced whole
    (retainKeys), command and args replaced, a null in the patch leaving the base's value."""
    base = yaml.safe_load(
        """
containers:
- name: main
  image: a
  args: [--x]
  env: [{name: A, value: "1"}, {name: B, value: "2"}]
  ports: [{containerPort: 8000, name: http}]
  volumeMounts: [{name: shm, mountPath: /dev/shm}]
volumes: [{name: shm, emptyDir: {medium: Memory}}]
nodeSelector: {gpu: h100}
"""
    )
    patch = yaml.safe_load(
        """
containers:
- name: main
  args: [--y]
  env: [{name: B, value: "3"}, {name: C, value: "4"}]
  ports: [{containerPort: 8000, protocol: TCP}]
- name: sidecar
  image: s
volumes: [{name: shm, hostPath: {path: /dev/shm}}]
nodeSelector: null
"""
    )
    merged = strategic_merge(base, patch)
    main, sidecar = merged["containers"]
    assert main == {
        "name": "main",
        "image": "a",
        "args": ["--y"],
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
        "ports": [{"containerPort": 8000, "name": "http", "protocol": "TCP"}],
        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
    }
    assert sidecar == {"name": "sidecar", "image": "s"}
    assert merged["volumes"] == [{"name": "shm", "hostPath": {"path": "/dev/shm"}}]
    assert merged["nodeSelector"] == {"gpu": "h100"}
