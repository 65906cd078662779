"""The keys vLLM production-stack's chart reads from its values (chart vllm-stack 0.1.12, commit a6c01db: the
properties of helm/values.schema.json and the keys helm/templates read), at the values' top level and in a
`servingEngineSpec.modelSpec[]` entry, for helm_values.py. The schema does not forbid other keys, so helm renders a
misspelt one (`vllmconfig`, `requestGpu`) into nothing and the chart's default stands: each is a warning naming
the nearest key, case aside. The keys of servingEngineSpec, routerSpec and the other sections are not checked."""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import Any

from ttftsim.validate.k8s_schema import SchemaFinding
from ttftsim.validate.rendered import note

# helm/values.yaml's sections (two of them the subcharts' of Chart.yaml), the deprecated *Strategy the templates
# still read, and Helm's own `global`
TOP_LEVEL_KEYS = frozenset(
    {
        "servingEngineSpec",
        "routerSpec",
        "cacheserverSpec",
        "loraAdapters",
        "loraController",
        "sharedPvcStorage",
        "extraObjects",
        "grafanaDashboards",
        "kube-prometheus-stack",
        "prometheus-adapter",
        "engineStrategy",
        "routerStrategy",
        "global",
    }
)
MODEL_SPEC_KEYS = frozenset(
    {
        "name",
        "enabled",
        "repository",
        "tag",
        "imagePullSecret",
        "modelURL",
        "modelRevision",
        "replicaCount",
        "requestCPU",
        "requestMemory",
        "requestGPU",
        "requestGPUType",
        "requestGPUMem",
        "requestGPUMemPercentage",
        "requestGPUCores",
        "limitCPU",
        "limitMemory",
        "limitGPUMem",
        "limitGPUMemPercentage",
        "limitGPUCores",
        "resources",
        "vllmConfig",
        "lmcacheConfig",
        "raySpec",
        "keda",
        "pdb",
        "enableLoRA",
        "enableTool",
        "toolCallParser",
        "chatTemplate",
        "chatTemplateConfigMap",
        "env",
        "envFromSecret",
        "hf_token",
        "initContainer",
        "extraVolumes",
        "extraVolumeMounts",
        "pvcStorage",
        "pvcAccessMode",
        "pvcAnnotations",
        "pvcLabels",
        "pvcMatchLabels",
        "pvcExistingClaimName",
        "storageClass",
        "shmSize",
        "affinity",
        "nodeSelectorTerms",
        "nodeName",
        "tolerations",
        "tolerationsPolicy",
        "priorityClassName",
        "runtimeClassName",
        "serviceAccountName",
        "serviceAnnotations",
        "annotations",
        "labels",
        "podAnnotations",
        "podLabels",
    }
)


def unread_keys(source: str, where: str, data: dict[str, Any], known: Collection[str]) -> list[SchemaFinding]:
    """A warning for each key of `data` outside `known` (the chart reads none of them), with the nearest known
    key; `where` leads the key in the message (`modelSpec NAME: vllmConfig.`)."""
    by_case = {key.lower(): key for key in known}
    notes = []
    for key in sorted(set(map(str, data)) - set(known)):
        near = difflib.get_close_matches(key.lower(), sorted(by_case), n=1)
        hint = f" (did you mean {by_case[near[0]]}?)" if near else ""
        notes.append(note(source, f"{where}{key} is not a key the chart reads{hint}: helm ignores it", "warning"))
    return notes
