"""validate reads LMCache's connector from --kv-transfer-config and its tiers from LMCACHE_* variables
(validate/lmcache_env.py, docs/engine-semantics.md 14)."""

from __future__ import annotations

from ttftsim.config.engine import EngineArgs
from ttftsim.validate.vllm_command import read_vllm_container

LMCACHE = '{"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}'


def env(**values: str) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in values.items()]


def test_lmcache_tiers_come_from_the_connector_and_the_lmcache_variables() -> None:
    words = ["vllm", "serve", "m", "--kv-transfer-config", LMCACHE]
    variables = env(
        LMCACHE_CHUNK_SIZE="256",
        LMCACHE_LOCAL_CPU="True",
        LMCACHE_MAX_LOCAL_CPU_SIZE="40",
        LMCACHE_LOCAL_DISK="file:///mnt/nvme/lmcache/",
        LMCACHE_MAX_LOCAL_DISK_SIZE="200",
        LMCACHE_ENABLE_ASYNC_LOADING="1",
        LMCACHE_SAVE_DECODE_CACHE="true",
        LMCACHE_LOG_LEVEL="INFO",
    )
    command = read_vllm_container(words, variables, "0.15.1", "Deployment/x", "k8s.yaml")
    assert command.engine == {
        "kv_transfer_config": {"kv_connector": "LMCacheConnectorV1"},
        "lmcache": {
            "chunk_size": 256,
            "local_cpu": True,
            "max_local_cpu_size": 40.0,
            "local_disk": "/mnt/nvme/lmcache/",
            "max_local_disk_size": 200.0,
            "enable_async_loading": True,
        },
    }
    assert command.not_modelled == ["LMCACHE_SAVE_DECODE_CACHE"]
    assert command.findings == []
    assert EngineArgs(**command.engine).lmcache is not None  # what validate predicts with


def test_another_connector_is_not_modelled_and_a_config_file_is_named() -> None:
    nixl = '{"kv_connector": "NixlConnector", "kv_role": "kv_both"}'
    words = ["vllm", "serve", "m", "--kv-transfer-config", nixl]
    command = read_vllm_container(words, env(LMCACHE_MAX_LOCAL_CPU_SIZE="40"), "0.15.1", "D/x", "k8s.yaml")
    assert command.engine == {} and command.not_modelled == [f"--kv-transfer-config {nixl}"]
    words = ["vllm", "serve", "m", "--kv-transfer-config", LMCACHE]
    variables = env(LMCACHE_CONFIG_FILE="/etc/lmcache.yaml", LMCACHE_MAX_LOCAL_CPU_SIZE="x")
    command = read_vllm_container(words, variables, "0.15.1", "D/x", "k8s.yaml")
    assert command.engine == {"kv_transfer_config": {"kv_connector": "LMCacheConnectorV1"}}
    assert command.not_modelled == ["LMCACHE_MAX_LOCAL_CPU_SIZE=x"]  # LMCache keeps its default then
    assert [f.message for f in command.findings] == [
        "D/x: LMCACHE_CONFIG_FILE /etc/lmcache.yaml: LMCache reads its settings from this file in the container; "
        "ttftsim cannot see it and predicts with the LMCACHE_* variables and LMCache's defaults"
    ]
