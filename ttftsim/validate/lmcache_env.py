"""LMCache's connector on a vLLM command line (--kv-transfer-config) and LMCache's settings in the container's
environment, for `ttftsim validate` (docs/engine-semantics.md 14).

LMCache reads its settings from the YAML file named by LMCACHE_CONFIG_FILE, else from LMCACHE_<NAME>
variables (lmcache/v1/config.py _update_config_from_env; integration/vllm/utils.py lmcache_get_config), never
from vLLM's arguments. The tier settings ttftsim models become `engine.lmcache`; a config file is in the
container, where ttftsim cannot read it (a warning); other LMCACHE_* variables are read by LMCache and not
modelled.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def _to_bool(text: str) -> bool:
    return text.strip().lower() in ("true", "1")  # lmcache/v1/config_base.py _to_bool


def _local_disk(text: str) -> str:
    return text.strip().removeprefix("file://")  # _parse_local_disk drops the file:// scheme


# LMCACHE_<NAME> -> (engine.lmcache field, LMCache's converter)
TIER_VARIABLES: dict[str, tuple[str, Callable[[str], Any]]] = {
    "LMCACHE_CHUNK_SIZE": ("chunk_size", int),
    "LMCACHE_LOCAL_CPU": ("local_cpu", _to_bool),
    "LMCACHE_MAX_LOCAL_CPU_SIZE": ("max_local_cpu_size", float),
    "LMCACHE_LOCAL_DISK": ("local_disk", _local_disk),
    "LMCACHE_MAX_LOCAL_DISK_SIZE": ("max_local_disk_size", float),
    "LMCACHE_REMOTE_URL": ("remote_url", str.strip),
    "LMCACHE_USE_LAYERWISE": ("use_layerwise", _to_bool),
    "LMCACHE_ENABLE_ASYNC_LOADING": ("enable_async_loading", _to_bool),
    "LMCACHE_LOOKUP_TIMEOUT_MS": ("lookup_timeout_ms", int),
}
NO_EFFECT = frozenset({"LMCACHE_LOG_LEVEL", "LMCACHE_USE_EXPERIMENTAL", "LMCACHE_TRACK_USAGE"})


def kv_transfer_value(value: Any) -> dict[str, Any] | None:
    """The engine's kv_transfer_config for a --kv-transfer-config value (JSON text or already a mapping);
    None for a connector ttftsim does not model (a not-modelled warning)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, dict) or value.get("kv_connector") != "LMCacheConnectorV1":
        return None
    if value.get("kv_role", "kv_both") != "kv_both":
        return None  # producer / consumer roles of disaggregated prefill
    return {"kv_connector": "LMCacheConnectorV1"}


def lmcache_environment(env: list[Any]) -> tuple[dict[str, Any], list[str], str]:
    """(engine.lmcache settings, LMCACHE_* variables read and not modelled, the config file named or '').
    A value LMCache cannot convert is skipped with its warning, as LMCache keeps the default then."""
    settings: dict[str, Any] = {}
    unmodelled: list[str] = []
    config_file = ""
    for entry in env:
        name = str(entry.get("name", "")) if isinstance(entry, dict) else ""
        if not name.startswith("LMCACHE_") or name in NO_EFFECT:
            continue
        text = str(entry.get("value", ""))
        if name == "LMCACHE_CONFIG_FILE":
            config_file = text
        elif name in TIER_VARIABLES:
            field, convert = TIER_VARIABLES[name]
            try:
                settings[field] = convert(text)
            except ValueError:
                unmodelled.append(f"{name}={text}")
        else:
            unmodelled.append(name)
    return settings, unmodelled, config_file
