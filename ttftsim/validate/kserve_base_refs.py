"""A KServe LLMInferenceService's `spec.baseRefs` merged into its spec as KServe's controller merges them
(kserve/kserve @ aaac4e2, pkg/controller/v1alpha2/llmisvc/config_merge.go: combineBaseRefsConfig, MergeSpecs,
mergeSpecs, getConfig): the spec of each LLMInferenceServiceConfig named, in the order listed, then the service's
own spec, each a strategic merge patch over those before it, so a later config overrides an earlier one and the
service has the last word (pkg/apis/serving/v1alpha2/llm_inference_service_types.go, BaseRefs). KServe looks a
config up by name in the service's namespace, then in its own (`kserve`); here among the input files'
LLMInferenceServiceConfigs (one without a namespace matches any). One that is not there is an input error naming
the service's file and the baseRefs entry: what it would merge cannot be read.

The strategic merge, as k8s.io/apimachinery strategicpatch applies core/v1's patch tags: mappings merge key by key;
a list of containers, volumes, env entries or image pull secrets merges by name, ports by containerPort, volume
mounts by mountPath (a volume's source is replaced whole: retainKeys); any other list, and a scalar, is replaced.
Left out: the configs' `{{ ... }}` template variables (ReplaceVariables), which stay as written; the order a
strategic merge gives merged list entries (here the earlier spec's first, then the new ones). KServe's well-known
configs, applied before the baseRefs, are kserve.py's own template."""

from __future__ import annotations

from typing import Any

from ttftsim.errors import InputError
from ttftsim.validate.rendered import Documents

GROUP = "serving.kserve.io"
KSERVE_NAMESPACE = "kserve"  # constants.KServeNamespace: getConfig's second place to look
MERGE_KEYS = {  # k8s.io/api core/v1 patchMergeKey of each list with patchStrategy merge
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
}
RETAIN_KEYS = frozenset({"volumes"})  # patchStrategy merge,retainKeys: an entry keeps only the patch's keys


def with_base_refs(source: str, service: dict[str, Any], documents: Documents) -> dict[str, Any]:
    """The service with its spec merged over its baseRefs' (the service itself where it names none)."""
    spec = service.get("spec")
    refs = spec.get("baseRefs") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(refs, list) or not refs:
        return service
    configs = [d for _, d in documents if _group(d) == GROUP and d.get("kind") == "LLMInferenceServiceConfig"]
    merged: dict[str, Any] = {}
    for index, ref in enumerate(refs):
        name = str(ref.get("name") or "") if isinstance(ref, dict) else ""
        config = _config(name, _namespace(service), configs)
        if config is None:
            raise InputError(
                source,
                f"spec.baseRefs.{index}",
                f"LLMInferenceServiceConfig {name!r} is not in the files: KServe merges its spec into "
                f"LLMInferenceService/{_name(service)}, so what runs cannot be read without it; give the file "
                "that defines it with --manifest",
            )
        config_spec = config.get("spec")
        merged = strategic_merge(merged, config_spec if isinstance(config_spec, dict) else {})
    return service | {"spec": strategic_merge(merged, spec)}


def strategic_merge(base: Any, patch: Any) -> Any:
    """`patch` over `base` as a strategic merge patch of core/v1 types applies it (see the module's docstring); a
    key set to null in the patch leaves the base's value (Go's omitempty drops it from KServe's patch)."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return patch
    merged = dict(base)
    for key, value in patch.items():
        if value is None:
            continue
        if key in MERGE_KEYS and isinstance(value, list) and isinstance(merged.get(key), list):
            merged[key] = _merged_list(merged[key], value, MERGE_KEYS[key], key in RETAIN_KEYS)
        else:
            merged[key] = strategic_merge(merged.get(key), value)
    return merged


def _merged_list(base: list[Any], patch: list[Any], key: str, retain: bool) -> list[Any]:
    """Entries with the same merge key merged (a retainKeys entry keeps only the patch's keys), new ones added."""
    merged = list(base)
    at = {entry[key]: i for i, entry in enumerate(merged) if isinstance(entry, dict) and key in entry}
    for entry in patch:
        if isinstance(entry, dict) and entry.get(key) in at:
            old = merged[at[entry[key]]]
            kept = {k: v for k, v in old.items() if k in entry} if retain else old
            merged[at[entry[key]]] = strategic_merge(kept, entry)
        else:
            merged.append(entry)
    return merged


def _config(name: str, namespace: str | None, configs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The config KServe's getConfig finds: the service's namespace first, then KServe's."""
    named = [c for c in configs if _name(c) == name and name]
    for wanted in (namespace, KSERVE_NAMESPACE):
        found = next((c for c in named if _namespace(c) in (wanted, None) or wanted is None), None)
        if found is not None:
            return found
    return None


def _group(document: dict[str, Any]) -> str:
    return str(document.get("apiVersion", "")).split("/")[0]


def _name(document: dict[str, Any]) -> str:
    metadata = document.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""


def _namespace(document: dict[str, Any]) -> str | None:
    metadata = document.get("metadata")
    found = metadata.get("namespace") if isinstance(metadata, dict) else None
    return None if found is None else str(found)
