"""Forms of a vLLM deployment that validate recognises but does not read, named in a finding in place of "no
Deployment ... with a vLLM container" (k8s_schema.py unsupported_findings):

- a Deployment, StatefulSet or LeaderWorkerSet whose container runs another vLLM entrypoint module than the OpenAI
  API server, such as `python3 -m vllm.entrypoints.grpc_server` (vLLM's gRPC server, which the Gateway API
  Inference Extension's gpu-grpc-deployment.yaml runs). It parses `vllm serve`'s flags (make_arg_parser), but
  serves no HTTP API: its probes, ports and the prediction are not what the checks model;
- a KServe LLMInferenceServiceConfig: a template that an LLMInferenceService merges in through `spec.baseRefs`
  (or KServe's own well-known configs); it runs no pods of its own.
"""

from __future__ import annotations

from typing import Any

from ttftsim.validate.container_command import container_words
from ttftsim.validate.vllm_args import API_SERVER_MODULE, CLI_MODULE

ENTRYPOINTS = "vllm.entrypoints."
WORKLOADS = ("Deployment", "StatefulSet", "LeaderWorkerSet")
KNOWN_MODULES = {"vllm.entrypoints.grpc_server": "vLLM's gRPC server"}
ENTRYPOINT_FIX = "validate a copy whose container runs `vllm serve` with the same flags (it parses the same ones)"
CONFIG_FIX = "validate it with the LLMInferenceService that names it in spec.baseRefs (read merged into it)"


def other_entrypoint(document: dict[str, Any]) -> str | None:
    """What a workload's container runs when it is a vLLM entrypoint module the checks do not read (`container NAME
    runs MODULE (...)`); None for any other workload or document."""
    if document.get("kind") not in WORKLOADS:
        return None
    for container in _pod_containers(document):
        module = _entrypoint_module(container)
        if module is not None:
            what = f" ({KNOWN_MODULES[module]})" if module in KNOWN_MODULES else ""
            return f"container {container.get('name', '')} runs {module}{what}"
    return None


def is_kserve_config(document: dict[str, Any]) -> bool:
    """A KServe LLMInferenceServiceConfig (serving.kserve.io)."""
    group = str(document.get("apiVersion", "")).split("/")[0]
    return group == "serving.kserve.io" and document.get("kind") == "LLMInferenceServiceConfig"


def _pod_containers(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The containers of a workload's pod template (a LeaderWorkerSet's leader's, else its workers')."""
    spec = _mapping(document, "spec")
    group = _mapping(spec, "leaderWorkerTemplate")
    template = _mapping(group, "leaderTemplate") or _mapping(group, "workerTemplate") or _mapping(spec, "template")
    containers = _mapping(template, "spec").get("containers")
    return [c for c in containers if isinstance(c, dict)] if isinstance(containers, list) else []


def _entrypoint_module(container: dict[str, Any]) -> str | None:
    """The `vllm.entrypoints.*` module a container runs with `python -m`, other than the OpenAI API server."""
    try:
        words = container_words(container)
    except ValueError:  # an unbalanced quote: another check names it
        return None
    for index, word in enumerate(words[1:], start=1):
        if words[index - 1] == "-m" and word.startswith(ENTRYPOINTS) and word != API_SERVER_MODULE:
            return None if word == CLI_MODULE and words[index + 1 : index + 2] == ["serve"] else word
    return None


def _mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}
