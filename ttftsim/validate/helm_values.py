"""Helm values files read as the workloads their chart renders, with the chart's defaults (docs/inputs.md):

- vLLM production-stack, chart vllm-stack 0.1.12 (vllm-project/production-stack, commit a6c01db,
  helm/templates/deployment-vllm-multi.yaml and _helpers.tpl, defaults from helm/values.yaml): one Deployment
  `RELEASE-NAME-deployment-vllm` per `servingEngineSpec.modelSpec[]` entry (not `enabled: false`, not a
  KubeRay `raySpec`), running `vllm serve modelURL` with the flags the template writes from `vllmConfig`
  (including its underscore spellings --gpu_memory_utilization, --max_loras) then `extraArgs`; requestGPU
  devices of requestGPUType (default nvidia.com/gpu); nodeSelectorTerms as required node affinity; an
  in-memory /dev/shm when tensorParallelSize is set; the chart's probes. A user's modelSpec list replaces
  the chart's example entry (Helm merges maps, not lists), so only the template's own defaults apply.
- llm-d ModelService, chart llm-d-modelservice v0.4.12 (llm-d-incubation/llm-d-modelservice, commit 3051935,
  templates/_helpers.tpl): the decode pool, a Deployment (a LeaderWorkerSet of `numWorkers` pods when
  `multinode`), running `vllm serve` of `modelArtifacts.uri` with --tensor-parallel-size, --data-parallel-size
  and --data-parallel-size-local from `decode.parallelism` (each above 1), then the container's args;
  dataLocal x tensor devices of the accelerator type's resource unless the container's resources name it; the
  chart's DP_SIZE, TP_SIZE and DP_SIZE_LOCAL in every container's env (validate/modelservice_parallelism.py). A
  prefill pool is named as not modelled.

The release is taken as `vllm` (the charts' tutorials: `helm install vllm ...`)."""

from __future__ import annotations

import json
import re
from typing import Any

from ttftsim.errors import InputError
from ttftsim.validate.k8s_schema import SchemaFinding
from ttftsim.validate.modelservice_parallelism import ChartParallelism, chart_parallelism, chart_workers
from ttftsim.validate.rendered import Documents, RenderedWorkload, gpu_resources, merge_resources, note, workload
from ttftsim.validate.stack_values_keys import MODEL_SPEC_KEYS, TOP_LEVEL_KEYS, unread_keys
from ttftsim.validate.yaml_fields import Fields

RELEASE = "vllm"
# production-stack helm/values.yaml servingEngineSpec probes (the template includes them on every engine)
STACK_PROBES = {
    "startupProbe": {"initialDelaySeconds": 15, "periodSeconds": 10, "failureThreshold": 60},
    "livenessProbe": {"initialDelaySeconds": 15, "periodSeconds": 10, "failureThreshold": 3},
    "readinessProbe": {"initialDelaySeconds": 15, "periodSeconds": 5, "failureThreshold": 3},
}
# vllmConfig key -> the flag deployment-vllm-multi.yaml writes for it, as it spells it
STACK_FLAGS = {
    "maxModelLen": "--max-model-len",
    "dtype": "--dtype",
    "tensorParallelSize": "--tensor-parallel-size",
    "maxNumSeqs": "--max-num-seqs",
    "gpuMemoryUtilization": "--gpu_memory_utilization",
    "maxLoras": "--max_loras",
    "runner": "--runner",
    "convert": "--convert",
}
# llm-d-modelservice values.yaml accelerator.resources
ACCELERATORS = {
    "nvidia": "nvidia.com/gpu",
    "amd": "amd.com/gpu",
    "intel-i915": "gpu.intel.com/i915",
    "intel-xe": "gpu.intel.com/xe",
    "intel-gaudi": "habana.ai/gaudi",
    "google": "google.com/tpu",
    "rebellions-atom": "rebellions.ai/ATOM",
}


def values_workloads(documents: Documents) -> list[RenderedWorkload]:
    """The workloads of each production-stack or llm-d ModelService values document (those without a kind)."""
    out: list[RenderedWorkload] = []
    for source, document in documents:
        if "kind" in document:
            continue
        values = Fields.of(source, "", document)
        if values.has("servingEngineSpec"):
            out += _production_stack(values)
        elif values.has("modelArtifacts"):
            out += _modelservice(values)
    return out


def _production_stack(values: Fields) -> list[RenderedWorkload]:
    unread = tuple(unread_keys(values.source, "", values.data, TOP_LEVEL_KEYS))
    out = [RenderedWorkload(values.source, None, unread)] if unread else []
    engine = values.mapping("servingEngineSpec")
    if not engine.flag("enableEngine", True):
        return out
    specs = [s for s in engine.mappings("modelSpec") if s.flag("enabled", True)]
    for spec in specs:
        name = spec.text("name") or ""
        if spec.mapping("raySpec").flag("enabled", False):
            message = f"modelSpec {name}: a KubeRay cluster (raySpec) is not read; validate the rendered chart"
            out.append(RenderedWorkload(values.source, None, (note(values.source, message, "warning"),)))
            continue
        out.append(_stack_engine(values.source, engine, spec))
    made = [w.document["metadata"]["name"] for w in out if w.document is not None]
    if len(made) > 1:  # validate checks one serving workload: the first
        message = f"{len(made)} engines ({', '.join(made)}); validate checks and predicts the first"
        out.append(RenderedWorkload(values.source, None, (note(values.source, message, "warning"),)))
    return out


def _stack_engine(source: str, engine: Fields, spec: Fields) -> RenderedWorkload:
    required = ["name", "modelURL", "repository", "tag"]
    required += [] if spec.has("resources") else ["requestMemory", "requestCPU"]  # chart.resources
    for key in required:  # the template's `required`: helm template fails without them
        if not spec.text(key):
            raise InputError(source, spec.where(key), "required by the chart (helm template refuses without it)")
    name, model = str(spec.text("name")), str(spec.text("modelURL"))
    words = ["vllm", "serve", model, "--host", "0.0.0.0", "--port", str(engine.count("containerPort", 8000))]
    words += ["--enable-lora"] if spec.flag("enableLoRA", False) else []
    words += ["--enable-auto-tool-choice"] if spec.flag("enableTool", False) else []
    words += ["--tool-call-parser", str(spec.text("toolCallParser"))] if spec.has("toolCallParser") else []
    config = spec.mapping("vllmConfig")
    if config.data:
        words += _stack_config_flags(config)
    lmcache_words, lmcache_env, lmcache_notes = _stack_lmcache(source, name, spec.mapping("lmcacheConfig"), config)
    words += lmcache_words
    gpus = spec.count("requestGPU", 0)
    gpu_type = spec.text("requestGPUType") or "nvidia.com/gpu"
    container: dict[str, Any] = {
        "name": "vllm",
        "image": f"{spec.text('repository', '')}:{spec.text('tag', '')}",
        "command": words,
        "resources": spec.data.get("resources") or _stack_resources(spec, gpus, gpu_type),
    }
    for probe, default in STACK_PROBES.items():
        container[probe] = {**default, **engine.mapping(probe).data}
    env = [{"name": "VLLM_USE_V1", "value": "0"}] if str(config.data.get("v0", "")) == "1" else []
    container["env"] = env + spec.items("env") + lmcache_env
    pod = _stack_pod(spec, container, config.has("tensorParallelSize"))
    deployment = f"{RELEASE}-{name}-deployment-vllm"
    made = workload("Deployment", deployment, spec.count("replicaCount", 1), pod)
    message = f"production-stack values, modelSpec {name}, read as the Deployment {deployment} the chart renders"
    unread = unread_keys(source, f"modelSpec {name}: ", spec.data, MODEL_SPEC_KEYS)
    unread += unread_keys(source, f"modelSpec {name}: vllmConfig.", config.data, STACK_CONFIG_KEYS)
    notes = (note(source, message), *unread, *lmcache_notes)
    return RenderedWorkload(source, made, notes)


def _stack_lmcache(
    source: str, name: str, lmcache: Fields, config: Fields
) -> tuple[list[str], list[dict[str, str]], list[SchemaFinding]]:
    """What the chart renders for `lmcacheConfig` (helm/templates/deployment-vllm-multi.yaml): with `enabled`, the
    LMCache connector as --kv-transfer-config (kv_role from kvRole, default kv_both) and its environment; the CPU
    tier (cpuOffloadingBufferSize GB above 0) and the disk size as LMCACHE_* variables, which
    validate/lmcache_env.py then reads as for any container."""
    if not lmcache.data:
        return [], [], []
    words: list[str] = []
    env: list[dict[str, str]] = []
    notes: list[SchemaFinding] = []
    if lmcache.flag("enabled", False):
        role = lmcache.text("kvRole") or "kv_both"
        connector = "LMCacheConnector" if str(config.data.get("v0", "")) == "1" else "LMCacheConnectorV1"
        words += ["--kv-transfer-config", json.dumps({"kv_connector": connector, "kv_role": role})]
        env += [{"name": "LMCACHE_USE_EXPERIMENTAL", "value": "True"}, {"name": "VLLM_RPC_TIMEOUT", "value": "1000000"}]
        if lmcache.flag("enablePD", False):
            message = f"modelSpec {name}: lmcacheConfig.enablePD (prefill/decode disaggregation over NIXL) not modelled"
            notes.append(note(source, message, "warning"))
    cpu = str(lmcache.data.get("cpuOffloadingBufferSize", "")).strip()
    if re.fullmatch(r"\d+(\.\d+)?", cpu) and int(float(cpu)) > 0:  # the chart's `gt (int ...) 0`, written as given
        env += [{"name": "LMCACHE_LOCAL_CPU", "value": "True"}, {"name": "LMCACHE_MAX_LOCAL_CPU_SIZE", "value": cpu}]
    if lmcache.has("diskOffloadingBufferSize"):
        env.append({"name": "LMCACHE_MAX_LOCAL_DISK_SIZE", "value": str(lmcache.data["diskOffloadingBufferSize"])})
    return words, env, notes


STACK_CONFIG_KEYS = {*STACK_FLAGS, "enableChunkedPrefill", "enablePrefixCaching", "extraArgs", "v0"}


def _stack_pod(spec: Fields, container: dict[str, Any], has_tp: bool) -> dict[str, Any]:
    """The pod around the engine container: /dev/shm when tensorParallelSize is set, the node affinity."""
    pod: dict[str, Any] = {"containers": [container]}
    if has_tp:
        container["volumeMounts"] = [{"name": "shm", "mountPath": "/dev/shm"}]
        pod["volumes"] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    if spec.has("affinity"):
        pod["affinity"] = spec.data["affinity"]
    elif spec.has("nodeSelectorTerms"):
        terms = spec.items("nodeSelectorTerms")
        pod["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    return pod


def _stack_config_flags(config: Fields) -> list[str]:
    words = []
    if config.has("enableChunkedPrefill"):
        words.append(
            "--enable-chunked-prefill" if config.flag("enableChunkedPrefill", True) else "--no-enable-chunked-prefill"
        )
    words.append(
        "--enable-prefix-caching" if config.flag("enablePrefixCaching", False) else "--no-enable-prefix-caching"
    )
    for key, flag in STACK_FLAGS.items():
        if config.has(key):
            words += [flag, str(config.text(key))]
    return words + config.words("extraArgs")


def _stack_resources(spec: Fields, gpus: int, gpu_type: str) -> dict[str, Any]:
    """chart.resources: requests of memory, CPU and GPUs; limits when any limit is set or GPUs requested."""
    requests: dict[str, Any] = {"memory": spec.text("requestMemory"), "cpu": spec.text("requestCPU")}
    limits: dict[str, Any] = {}
    for key, resource in (("limitMemory", "memory"), ("limitCPU", "cpu")):
        if spec.has(key):
            limits[resource] = spec.text(key)
    if gpus > 0:
        requests[gpu_type] = limits[gpu_type] = gpus
    resources = {"requests": {k: v for k, v in requests.items() if v is not None}}
    return resources | ({"limits": limits} if limits else {})


def _modelservice(values: Fields) -> list[RenderedWorkload]:
    source = values.source
    artifacts = values.mapping("modelArtifacts")
    name = artifacts.text("name") or ""
    uri = (artifacts.text("uri") or "").replace("{{ .Values.modelArtifacts.name }}", name).replace('"', "")
    model = _modelservice_model(source, uri)
    decode = values.mapping("decode")
    if not decode.flag("create", True):
        raise InputError(source, "decode.create", "false: no decode pool, nothing serves requests")
    parallelism = decode.mapping("parallelism")
    sizes = chart_parallelism(parallelism)
    accelerator = values.mapping("accelerator").text("type", "nvidia") or "nvidia"
    resource = ACCELERATORS.get(accelerator)
    containers = []
    for container in decode.mappings("containers"):
        containers.append(_modelservice_container(container, model, name, sizes, resource))
    if not containers:
        raise InputError(source, "decode.containers", "no container: nothing serves requests")
    pod: dict[str, Any] = {"containers": containers}
    types = decode.mapping("acceleratorTypes")
    if types.has("labelKey"):
        expression = {"key": types.text("labelKey"), "operator": "In", "values": types.words("labelValues")}
        terms = [{"matchExpressions": [expression]}]
        pod["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    multinode = values.flag("multinode", False)
    kind = "LeaderWorkerSet" if multinode else "Deployment"
    pods = chart_workers(parallelism) if multinode else 1
    made = workload(kind, f"{RELEASE}-decode", decode.count("replicas", 1), pod, pods)
    notes = [note(source, f"llm-d ModelService values read as the decode {kind} {RELEASE}-decode the chart renders")]
    if resource not in ("nvidia.com/gpu", "amd.com/gpu"):
        message = (
            f"accelerator {accelerator} ({resource or 'no device resource'}) is neither NVIDIA nor AMD: no profile"
        )
        notes.append(note(source, message, "warning"))
    if values.mapping("prefill").flag("create", False):
        notes.append(
            note(
                source,
                "a prefill pool (P/D disaggregation) is not modelled: decode pods predicted serving whole requests",
                "warning",
            )
        )
    return [RenderedWorkload(source, made, tuple(notes))]


def _modelservice_model(source: str, uri: str) -> str:
    """argsByProtocol: hf://ORG/MODEL is the model; pvc+hf://CLAIM/.../ORG/MODEL its last two parts."""
    protocol, _, rest = uri.partition("://")
    if protocol == "hf" and rest:
        return rest
    if protocol == "pvc+hf" and rest.count("/") >= 2:
        return "/".join(rest.split("/")[-2:])
    raise InputError(
        source, "modelArtifacts.uri", f"{uri or 'nothing'}: only hf:// and pvc+hf:// are read (which model?)"
    )


def _modelservice_container(
    container: Fields, model: str, served: str, sizes: ChartParallelism, resource: str | None
) -> dict[str, Any]:
    command = container.text("modelCommand", "custom")
    flags = sizes.vllm_flags() + (["--served-model-name", served] if served else [])
    out = dict(container.data)
    out["env"] = container.items("env") + sizes.env()  # parallelismEnv, after the user's env (a later name wins)
    if command == "vllmServe":
        out["command"], out["args"] = ["vllm", "serve"], [model, "--port", "8000", *flags, *container.words("args")]
    elif command == "imageDefault":
        out["command"] = ["python", "-m", "vllm.entrypoints.openai.api_server"]
        out["args"] = ["--model", model, "--port", "8000", *flags, *container.words("args")]
    gpus = sizes.tensor * sizes.data_local
    devices = Fields(container.source, "", gpu_resources(resource, gpus) if resource is not None else {})
    out["resources"] = merge_resources(devices, container.mapping("resources"))  # the container's own win
    return out
