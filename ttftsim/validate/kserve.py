"""KServe resources read as the Deployment KServe's controller creates for them (kserve/kserve, commit aaac4e2,
2026-08; docs/inputs.md cites each rule):

- InferenceService (serving.kserve.io/v1beta1) with `spec.predictor.model`: its ServingRuntime or
  ClusterServingRuntime (named by `model.runtime`, or the first in the files that supports the model format
  with autoSelect, or KServe's own huggingface / vLLM runtimes, config/runtimes/*.yaml) merged with the model
  as pkg/controller/v1beta1/inferenceservice/utils/utils.go MergeRuntimeContainers does: the model's fields
  override the runtime container's, and args are the runtime's followed by the model's; `{{.Name}}` is the
  InferenceService's name. The Hugging Face runtime (python -m huggingfaceserver) reads its own flags
  (--model_id, --model_name, --backend, --max_length...) and hands the rest to vLLM's parser: its own flags
  are taken out, --model_id (or an hf:// storageUri) is the model (huggingfaceserver.py; a runtime wrapping it
  in a shell script is read at the script's `-m huggingfaceserver` line). The Deployment is `NAME-predictor` with
  `minReplicas` (default 1) replicas. `spec.predictor.containers` (a custom container) is read as written.
- LLMInferenceService (v1alpha1/v1alpha2), its spec merged over the LLMInferenceServiceConfigs its baseRefs name
  (kserve_base_refs.py): the `main` container of `spec.template` running KServe's template
  command (config/llmisvcconfig/config-llm-template.yaml): `vllm serve` of the model, --tensor-parallel-size
  from spec.parallelism.tensor (with data, dataLocal or expert, the data-parallel template's flags too:
  config-llm-worker-data-parallel.yaml), then $VLLM_ADDITIONAL_ARGS and the container's args, with the template's
  probes on /health:8000 and its in-memory /dev/shm where the user's template sets none. A `main` that sets its
  own command replaces the template's (a strategic merge replaces a list): it runs as written, with the model
  where it names KServe's /mnt/models. The Deployment is `NAME-kserve` with spec.replicas. A prefill pool or
  multi-node workers are named as not modelled.

Not read: Knative autoscaling (the serverless mode's concurrency target), transformers and explainers,
storage initializers, inference graphs."""

from __future__ import annotations

import re
import shlex
from typing import Any

from ttftsim.errors import InputError
from ttftsim.validate.container_command import container_words_are_shell
from ttftsim.validate.huggingfaceserver import KSERVE_PORT, MODEL_DIR, backend, huggingface_args, server_arguments
from ttftsim.validate.k8s_schema import SchemaFinding
from ttftsim.validate.kserve_base_refs import with_base_refs
from ttftsim.validate.manifest_shapes import Container, PodSpec, check_part
from ttftsim.validate.rendered import Documents, RenderedWorkload, merge_resources, note, with_tcp_readiness, workload
from ttftsim.validate.yaml_fields import Fields

GROUP = "serving.kserve.io"
BACKEND_FIX = "set --backend=vllm (or leave it auto) to serve with vLLM, which ttftsim models"
RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
MODEL_SOURCE = "model-source"  # the check of the warning that the model comes from storage: dropped when named
# KServe's own runtimes (config/runtimes/kserve-huggingfaceserver.yaml, kserve-vllmserver.yaml), by model format
BUILTIN_RUNTIMES: dict[str, dict[str, Any]] = {
    "huggingface": {
        "name": "kserve-huggingfaceserver",
        "image": "kserve/huggingfaceserver",
        "args": ["--model_name={{.Name}}"],
        "volumeMounts": [{"name": "devshm", "mountPath": "/dev/shm"}],
    },
    "vllm": {
        "name": "kserve-vllmserver",
        "image": "kserve/vllmserver",
        "command": ["python", "-m", "vllm.entrypoints.openai.api_server"],
        "args": ["--port=8080", "--served-model-name={{.Name}}", f"--model={MODEL_DIR}"],
        "readinessProbe": {"periodSeconds": 10, "failureThreshold": 3},
    },
}
# What KServe's LLMInferenceService template gives the `main` container and the pod beside the command
# (config/llmisvcconfig/config-llm-template.yaml): probes on vLLM's /health, the port, an in-memory /dev/shm.
# The user's own template fields merge into them as a strategic merge does (_merged_template, _added).
_HEALTH = {"path": "/health", "port": 8000}
LLMISVC_CONTAINER: dict[str, Any] = {
    "ports": [{"containerPort": 8000}],
    "startupProbe": {"httpGet": _HEALTH, "initialDelaySeconds": 10, "periodSeconds": 10, "failureThreshold": 60},
    "livenessProbe": {"httpGet": _HEALTH, "periodSeconds": 10, "failureThreshold": 3},
    "readinessProbe": {"httpGet": _HEALTH, "periodSeconds": 5, "failureThreshold": 3},
    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
}
LLMISVC_VOLUMES = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
TEMPLATE_VARIABLES = ("VLLM_ADDITIONAL_ARGS", "VLLM_API_SERVER_COUNT")  # read by the templates' shell, not vLLM


def kserve_workloads(documents: Documents) -> list[RenderedWorkload]:
    """The Deployment of each InferenceService and LLMInferenceService in the documents."""
    runtimes = [(s, d) for s, d in documents if _is_kserve(d) and d.get("kind") in RUNTIME_KINDS]
    out = []
    for source, document in documents:
        if not _is_kserve(document):
            continue
        if document.get("kind") == "InferenceService":
            made = _inference_service(source, document, runtimes)
            if made is not None:
                out.append(made)
        elif document.get("kind") == "LLMInferenceService":  # its baseRefs' configs merged in (kserve_base_refs.py)
            out.append(_llm_inference_service(source, with_base_refs(source, document, documents)))
    return out


def _is_kserve(document: dict[str, Any]) -> bool:
    return str(document.get("apiVersion", "")).split("/")[0] == GROUP


def _inference_service(
    source: str, document: dict[str, Any], runtimes: list[tuple[str, dict[str, Any]]]
) -> RenderedWorkload | None:
    name = _name(document)
    predictor = Fields.of(source, "spec", document.get("spec")).mapping("predictor")
    pod: dict[str, Any] = {
        k: predictor.data[k] for k in ("nodeSelector", "affinity", "tolerations", "volumes") if k in predictor.data
    }
    check_part(PodSpec, pod, source, "spec.predictor")
    replicas = predictor.count("minReplicas", 1)
    notes = []
    if replicas == 0:  # Knative scales to zero: the first request after idle waits a whole cold start
        message = f"InferenceService/{name}: minReplicas 0 scales to zero; predicted with 1 replica, cold starts aside"
        notes.append(note(source, message, "warning"))
        replicas = 1
    if predictor.has("containers"):  # a custom container: the pods run it as written
        pod["containers"] = predictor.items("containers")
        for index, custom in enumerate(pod["containers"]):
            check_part(Container, custom, source, f"spec.predictor.containers.{index}")
        notes.append(note(source, f"InferenceService/{name}: its custom container read as the predictor's"))
    elif predictor.has("model"):
        check_part(Container, predictor.data["model"], source, "spec.predictor.model")
        made = _model_container(source, name, predictor.mapping("model"), runtimes)
        if made is None or isinstance(made, SchemaFinding):
            return None if made is None else RenderedWorkload(source, None, (made,))
        container, runtime_spec, model_notes = made
        notes += model_notes
        pod |= {k: v for k, v in runtime_spec.items() if k in ("nodeSelector", "affinity", "volumes") and k not in pod}
        pod["containers"] = [container]
    else:
        return None  # k8s_schema's unsupported-kind finding names it
    pod["containers"] = [_default_readiness(c, i, len(pod["containers"])) for i, c in enumerate(pod["containers"])]
    return RenderedWorkload(source, workload("Deployment", f"{name}-predictor", replicas, pod), tuple(notes))


def _default_readiness(container: Any, index: int, count: int) -> Any:
    """KServe's default readiness probe for the predictor container (`kserve-container`; of a custom predictor the
    first container when it is alone or unnamed, which KServe names so: CustomPredictor.Default) that sets none:
    TCP on its first port (else 8080), every 10 s, 3 failures (pkg/controller/v1beta1/inferenceservice/
    reconcilers/deployment/deployment_reconciler.go setDefaultPodSpec; Knative gives a serverless predictor a TCP
    probe likewise). vLLM listens only once the engine is up, so the probe holds traffic back while it loads."""
    if not isinstance(container, dict):
        return container
    named = container.get("name") == "kserve-container"
    if not (named or (index == 0 and (count == 1 or not container.get("name")))):
        return container  # a sidecar of a custom predictor: KServe gives it nothing
    return with_tcp_readiness(container, KSERVE_PORT)


def _model_container(
    source: str, name: str, model: Fields, runtimes: list[tuple[str, dict[str, Any]]]
) -> tuple[dict[str, Any], dict[str, Any], list[SchemaFinding]] | SchemaFinding | None:
    """The predictor container (runtime merged with the model), the runtime's pod spec, and notes; a finding
    when it does not run vLLM; None when no runtime serves the model format."""
    format_name = (model.mapping("modelFormat").text("name") or "").lower()
    runtime, runtime_name = _runtime(model, format_name, runtimes)
    if runtime is None:
        return None
    runtime_spec = Fields.of(runtime_name, "spec", runtime.get("spec"))
    containers = runtime_spec.mappings("containers")
    if not containers:
        raise InputError(runtime_name, "spec.containers", "the serving runtime has no container")
    check_part(Container, containers[0].data, runtime_name, containers[0].path)
    container = _merge(containers[0], model)
    container["args"] = [a.replace("{{.Name}}", name) for a in containers[0].words("args") + model.words("args")]
    read_as = f"the Deployment {name}-predictor that KServe makes with the runtime {runtime_name.split(' ')[-1]}"
    notes = [note(source, f"InferenceService/{name} read as {read_as}")]
    storage = model.text("storageUri") or ""
    hf_id = storage.removeprefix("hf://") if storage.startswith("hf://") else None
    if storage and hf_id is None:
        message = (
            f"InferenceService/{name}: the model comes from {storage}; name it with `model:` in the deployment file"
        )
        notes.append(SchemaFinding("warning", MODEL_SOURCE, f"{source}: {message}"))  # validate drops it if named
    server = _huggingface_server(source, name, container, (runtime_name, containers[0].path), hf_id)
    if server is not None and server.severity == "error":
        return server
    if server is not None:
        notes.append(server)
    elif hf_id is not None:
        container["args"] = [a.replace(MODEL_DIR, hf_id) for a in container["args"]]
    container.setdefault("ports", [{"containerPort": KSERVE_PORT}])
    return container, runtime_spec.data, notes


def _huggingface_server(
    source: str, name: str, container: dict[str, Any], runtime: tuple[str, str], hf_id: str | None
) -> SchemaFinding | None:
    """A huggingfaceserver container made into the `vllm serve` it starts (in place), with the note saying so; an
    unsupported-kind error for the transformers backend; None when the container does not run huggingfaceserver.
    `runtime`: the runtime's file and kind/name, and its container's path there."""
    server_args = server_arguments(container, *runtime)
    if server_args is None:
        return None
    if backend(server_args) == "huggingface":
        message = (
            f"{source}: KServe InferenceService/{name} runs Hugging Face transformers (--backend=huggingface), "
            "not vLLM: not modelled"
        )
        return SchemaFinding("error", "unsupported-kind", message, BACKEND_FIX)
    wrapped = " (the line of the runtime's shell script that runs it)" if container_words_are_shell(container) else ""
    container["command"], container["args"] = ["vllm", "serve"], huggingface_args(server_args, hf_id)
    return note(source, f"huggingfaceserver's own flags taken out, the rest read as vLLM's (backend vllm){wrapped}")


def _runtime(
    model: Fields, format_name: str, runtimes: list[tuple[str, dict[str, Any]]]
) -> tuple[dict[str, Any] | None, str]:
    """The runtime the controller picks: named, else the first auto-selectable one for the format, else KServe's."""
    wanted = model.text("runtime")
    for source, runtime in runtimes:
        spec = runtime.get("spec") or {}
        formats = [f for f in spec.get("supportedModelFormats") or [] if isinstance(f, dict)]
        named = wanted is not None and _name(runtime) == wanted
        chosen = wanted is None and any(
            str(f.get("name", "")).lower() == format_name and f.get("autoSelect") for f in formats
        )
        if named or chosen:
            return runtime, f"{source} {runtime.get('kind')}/{_name(runtime)}"
    builtin = BUILTIN_RUNTIMES.get(format_name)
    if builtin is None or (wanted is not None and wanted != builtin["name"]):
        return None, ""
    container = {k: v for k, v in builtin.items() if k != "name"} | {"name": "kserve-container"}
    return {"spec": {"containers": [container]}}, f"KServe's ClusterServingRuntime/{builtin['name']}"


def _merge(runtime: Fields, model: Fields) -> dict[str, Any]:
    """The runtime container with the model's fields over it (strategic merge: maps merge, env by name)."""
    merged = dict(runtime.data)
    for key in ("image", "command", "readinessProbe", "livenessProbe", "startupProbe", "volumeMounts"):
        if model.has(key):
            merged[key] = model.data[key]
    merged["resources"] = merge_resources(runtime.mapping("resources"), model.mapping("resources"))
    env = {str(e.get("name")): e for e in runtime.items("env") if isinstance(e, dict)}
    env |= {str(e.get("name")): e for e in model.items("env") if isinstance(e, dict)}
    merged["env"] = list(env.values())
    return merged


def _llm_inference_service(source: str, document: dict[str, Any]) -> RenderedWorkload:
    name = _name(document)
    spec = Fields.of(source, "spec", document.get("spec"))
    model = spec.mapping("model")
    uri = model.text("uri") or ""
    model_id = uri.removeprefix("hf://") if uri.startswith("hf://") else model.text("name")
    if not model_id:
        raise InputError(source, "spec.model", "no hf:// uri and no name: which model?")
    parallelism = spec.mapping("parallelism")
    tensor = parallelism.count("tensor", 1)
    template = spec.mapping("template")
    containers = template.mappings("containers")
    main = next((c for c in containers if c.text("name") == "main"), Fields(source, "spec.template.containers", {}))
    check_part(Container, main.data, source, main.path)
    env = [e for e in main.items("env") if isinstance(e, dict)]
    extra = next((str(e.get("value") or "") for e in env if e.get("name") == "VLLM_ADDITIONAL_ARGS"), "")
    try:
        extra_words = shlex.split(extra)
    except ValueError as exc:
        raise InputError(source, "VLLM_ADDITIONAL_ARGS", f"cannot split ({exc})") from None
    words = ["vllm", "serve", model_id, "--port", "8000"]
    words += ["--tensor-parallel-size", str(tensor)] if parallelism.has("tensor") else []
    words += ["--pipeline-parallel-size", str(parallelism.count("pipeline", 1))] if parallelism.has("pipeline") else []
    words += _data_parallel_words(spec, parallelism, env)
    container = _merged_template(dict(main.data) | {k: main.items(k) for k in ("ports", "volumeMounts")})
    container |= {"name": "main", "command": words + extra_words + main.words("args"), "args": []}
    container["image"] = main.text("image", "ghcr.io/llm-d/llm-d-cuda:v0.9.0")  # the template's image
    # the template's shell expands these into the command line (read above): not vLLM's variables
    container["env"] = [e for e in env if e.get("name") not in TEMPLATE_VARIABLES]
    if main.has("command"):  # the user's (or a baseRef's) command replaces the template's: it runs as written
        command, args = (_at_model(main.words(part), model_id, env) for part in ("command", "args"))
        container |= {"command": command, "args": args}
    pod = {k: v for k, v in template.data.items() if k in ("nodeSelector", "affinity")}
    check_part(PodSpec, pod, source, "spec.template")
    pod["volumes"] = _added(LLMISVC_VOLUMES, template.items("volumes"), "name")
    pod["containers"] = [container]
    pods = _data_parallel_pods(spec, parallelism)
    kind = "LeaderWorkerSet" if pods > 1 else "Deployment"
    made = workload(kind, f"{name}-kserve", spec.count("replicas", 1), pod, pods)
    notes = [note(source, f"LLMInferenceService/{name} read as the {kind} {name}-kserve that KServe makes")]
    for part, what in (("prefill", "a prefill pool (P/D disaggregation)"), ("worker", "multi-node workers")):
        if spec.has(part) and not (part == "worker" and pods > 1):  # the data-parallel template's pods are read
            notes.append(note(source, f"LLMInferenceService/{name}: {what} not modelled", "warning"))
    return RenderedWorkload(source, made, tuple(notes))


def _at_model(words: list[str], model_id: str, env: list[dict[str, Any]]) -> list[str]:
    """A command of the user's read as the template's is: KServe's model directory (MODEL_DIR, where its storage
    initializer puts the weights) as the model it holds, and $VLLM_ADDITIONAL_ARGS (or ${...}, and
    $VLLM_API_SERVER_COUNT) as the env's value, empty where it sets none (the shell's unset variable)."""
    values = {str(e.get("name")): str(e.get("value") or "") for e in env if e.get("name") in TEMPLATE_VARIABLES}
    names = "|".join(TEMPLATE_VARIABLES)
    variable = re.compile(rf"\$(?:\{{({names})\}}|({names})(?![A-Za-z0-9_]))")

    def value(match: re.Match[str]) -> str:
        return values.get(match.group(1) or match.group(2), "")

    return [variable.sub(value, re.sub(re.escape(MODEL_DIR) + r"(?=[\s\"';]|$)", model_id, word)) for word in words]


def _data_parallel_words(spec: Fields, parallelism: Fields, env: list[dict[str, Any]]) -> list[str]:
    """The flags KServe's data-parallel template (config/llmisvcconfig/config-llm-worker-data-parallel.yaml) adds,
    which its controller picks with a `worker` spec and data parallelism (pkg/controller/v1alpha2/llmisvc
    config_merge.go): --api-server-count $VLLM_API_SERVER_COUNT (default 8), --enable-expert-parallel with expert,
    --data-parallel-size data (default 1) and --data-parallel-size-local dataLocal (default 1). Without a worker
    the single-node template runs, which passes neither (nor expert)."""
    if not spec.has("worker") or not (parallelism.count("data", 0) or parallelism.count("dataLocal", 0)):
        return []
    servers = next((str(e.get("value") or "") for e in env if e.get("name") == "VLLM_API_SERVER_COUNT"), "") or "8"
    words = ["--api-server-count", servers]
    words += ["--enable-expert-parallel"] if parallelism.flag("expert", False) else []
    words += ["--data-parallel-size", str(parallelism.count("data", 0) or 1)]
    return [*words, "--data-parallel-size-local", str(parallelism.count("dataLocal", 0) or 1)]


def _data_parallel_pods(spec: Fields, parallelism: Fields) -> int:
    """Pods of one replica: with `worker`, the data-parallel template's leader and workers, data / dataLocal of them
    (each runs dataLocal ranks: --data-parallel-start-rank); else one."""
    data, local = parallelism.count("data", 0), parallelism.count("dataLocal", 0)
    if spec.has("worker") and local and data > local and data % local == 0:
        return data // local
    return 1


def _merged_template(main: dict[str, Any]) -> dict[str, Any]:
    """The template's `main` container with the user's over it as KServe merges them (a strategic merge,
    pkg/controller/v1alpha2/llmisvc/config_merge.go): a probe field by field, ports by containerPort, mounts by
    mountPath."""
    merged = LLMISVC_CONTAINER | main
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        if isinstance(main.get(probe), dict):
            merged[probe] = LLMISVC_CONTAINER[probe] | main[probe]
    merged["ports"] = _added(LLMISVC_CONTAINER["ports"], list(main.get("ports") or []), "containerPort")
    merged["volumeMounts"] = _added(
        LLMISVC_CONTAINER["volumeMounts"], list(main.get("volumeMounts") or []), "mountPath"
    )
    return merged


def _added(defaults: list[dict[str, Any]], given: list[Any], key: str) -> list[Any]:
    """A list merged as a strategic merge patch merges it: the given entries, and the defaults whose key none of
    them has."""
    taken = {entry.get(key) for entry in given if isinstance(entry, dict)}
    return [d for d in defaults if d[key] not in taken] + list(given)


def _name(document: dict[str, Any]) -> str:
    metadata = document.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""
