"""A container's environment as the kubelet builds it, from its `envFrom` and `env` and the ConfigMaps and Secrets in
the files, and Kubernetes' expansion of `$(NAME)` in command and args.

Kubernetes expands `$(NAME)` in command and args from the container's environment before the process starts
(`$$` is a literal `$`; a reference to a variable it does not define is left as written): kubernetes
pkg/kubelet/kuberuntime/kuberuntime_container.go makeRunContainerArgs -> third_party/forked/golang/expansion.
Known here: literal `value`s and the keys of ConfigMaps and Secrets in the files, in the pod's namespace; other
`valueFrom` sources (a field or resource of the pod) and variables a controller injects (LeaderWorkerSet's
LWS_GROUP_SIZE) are not, and a reference to them stays as written.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

_K8S_REFERENCE = re.compile(r"\$(\$|\(([A-Za-z_][A-Za-z0-9_.-]*)\))")
# names the kubelet or a controller adds to a container's environment, which a `$(NAME)` may read though no env
# entry defines them: a Service's links (pkg/kubelet/envvars: NAME_SERVICE_HOST, NAME_SERVICE_PORT[_PORTNAME],
# NAME_PORT[_8000_TCP[_PROTO|_PORT|_ADDR]]), LeaderWorkerSet's LWS_*, Knative's PORT and K_SERVICE, K_CONFIGURATION,
# K_REVISION
INJECTED = re.compile(r"LWS_\w+|K_(SERVICE|CONFIGURATION|REVISION)|PORT|\w+_SERVICE_(HOST|PORT\w*)|\w+_PORT(_\d+_\w+)?")


ConfigData = dict[tuple[str, str], dict[str, str]]  # (ConfigMap or Secret, name) -> its keys' values


def config_data(documents: list[tuple[str, dict[str, Any]]], namespace: str | None = None) -> ConfigData:
    """The ConfigMaps' `data` and the Secrets' `data` (base64) and `stringData` in the files, by kind and name, that
    a pod in `namespace` reads: the kubelet looks a reference up in the pod's own namespace, so an object that names
    another namespace than the pod's is not the one it reads (an object or a pod that names none is applied to the
    namespace kubectl is given, the same for both)."""
    found: ConfigData = {}
    for _, document in documents:
        metadata = document.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        kind, name, placed = document.get("kind"), str(metadata.get("name", "")), metadata.get("namespace")
        if namespace is not None and placed is not None and str(placed) != namespace:
            continue
        if kind == "ConfigMap":
            found[(kind, name)] = {str(k): str(v) for k, v in (document.get("data") or {}).items()}
        elif kind == "Secret":
            data = (document.get("data") or {}).items()
            values = {str(k): text for k, v in data if (text := _decoded(v)) is not None}
            found[(kind, name)] = values | {str(k): str(v) for k, v in (document.get("stringData") or {}).items()}
    return found


def _decoded(value: Any) -> str | None:
    try:
        return base64.b64decode(str(value), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def literal_env(container: dict[str, Any], stores: ConfigData | None = None) -> dict[str, str]:
    """The container's environment variables whose value is known here, as the kubelet builds them (kubernetes
    pkg/kubelet/kubelet_pods.go makeEnvironmentVariables): first `envFrom` (a ConfigMap's or Secret's keys, with
    its prefix), then `env` in order: a non-empty `value` with `$(NAME)` expanded from the variables before it,
    else a `valueFrom` (a ConfigMap's or Secret's key, known when that object is in the files; anything else
    unknown here, hiding an earlier value), else the empty string; a later entry of the same name replaces an
    earlier one."""
    stores = stores or {}
    values: dict[str, str] = {}
    sources = container.get("envFrom")
    for source in sources if isinstance(sources, list) else []:
        for kind, ref in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            name = ((source or {}).get(ref) or {}).get("name") if isinstance(source, dict) else None
            prefix = str(source.get("prefix") or "") if isinstance(source, dict) else ""
            values |= {prefix + key: value for key, value in stores.get((kind, str(name)), {}).items()}
    env = container.get("env")
    for entry in env if isinstance(env, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        value = "" if entry.get("value") is None else str(entry["value"])
        if value:
            values[entry["name"]] = kubernetes_expand(value, values)
        elif entry.get("valueFrom") is not None:
            known = _key_value(entry["valueFrom"], stores)
            if isinstance(known, str):
                values[entry["name"]] = known
            elif known is not _SKIPPED:
                values.pop(entry["name"], None)
        else:
            values[entry["name"]] = ""
    return values


_SKIPPED = object()  # an optional key its object lacks: the kubelet skips the entry (an earlier value stays)
KEY_REFS = (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef"))


def _key_ref(value_from: Any) -> tuple[str, dict[str, Any]] | None:
    """The kind and selector (name, key, optional) of a valueFrom's configMapKeyRef or secretKeyRef; None for any
    other source (a field or resource of the pod)."""
    for kind, ref in KEY_REFS:
        selector = value_from.get(ref) if isinstance(value_from, dict) else None
        if isinstance(selector, dict):
            return kind, selector
    return None


def _key_value(value_from: Any, stores: ConfigData) -> str | object | None:
    """A configMapKeyRef's or secretKeyRef's value when that object is in the files (None: not known here;
    _SKIPPED: an optional key the object in the files lacks, which the kubelet skips)."""
    found = _key_ref(value_from)
    if found is None:
        return None
    kind, selector = found
    store = stores.get((kind, str(selector.get("name"))))
    value = store.get(str(selector.get("key"))) if store is not None else None
    if value is None and store is not None and selector.get("optional") is True:
        return _SKIPPED
    return value


def missing_keys(container: dict[str, Any], stores: ConfigData) -> list[str]:
    """The env entries whose (non-optional) configMapKeyRef or secretKeyRef names a key that object in the files lacks:
    the kubelet does not start the container (CreateContainerConfigError: couldn't find key)."""
    missing = []
    env = container.get("env")
    for entry in env if isinstance(env, list) else []:
        found = _key_ref(entry.get("valueFrom")) if isinstance(entry, dict) else None
        if found is None or found[1].get("optional") is True:
            continue
        kind, selector = found
        store = stores.get((kind, str(selector.get("name"))))
        if store is not None and str(selector.get("key")) not in store:
            missing.append(f"{entry.get('name')}: {kind} {selector.get('name')} has no key {selector.get('key')}")
    return missing


def kubernetes_expand(word: str, env: dict[str, str]) -> str:
    """`$(NAME)` replaced by its value where the environment defines it, `$$` by `$`; anything else kept."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) == "$":
            return "$"
        return env.get(match.group(2), match.group(0))

    return _K8S_REFERENCE.sub(replace, word)


def undefined_references(words: list[str], container: dict[str, Any], stores: ConfigData) -> frozenset[str]:
    """The names of the `$(NAME)` references left in `words` (command and args as Kubernetes expanded them) that the
    container's environment cannot define: no env entry names it, no envFrom source may hold it (one that is not
    in the files may hold any), and neither the kubelet nor a controller adds it (INJECTED). Kubernetes passes
    such a reference to the program as written."""
    names = {match.group(2) for word in words for match in _K8S_REFERENCE.finditer(word) if match.group(2)}
    env = container.get("env")
    names -= {str(entry.get("name")) for entry in env if isinstance(entry, dict)} if isinstance(env, list) else set()
    sources = container.get("envFrom")
    for source in sources if isinstance(sources, list) else []:
        for kind, ref in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            selector = source.get(ref) if isinstance(source, dict) else None
            if not isinstance(selector, dict):
                continue
            keys = stores.get((kind, str(selector.get("name"))))
            if keys is None:  # not in the files: it may hold any name
                return frozenset()
            names -= {str(source.get("prefix") or "") + key for key in keys}
    return frozenset(name for name in names if not INJECTED.fullmatch(name))
