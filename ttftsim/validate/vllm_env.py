"""A vLLM container's VLLM_* environment against the variables that vLLM version reads (vllm/envs.py): one it does
not read is a warning (an error with --fail-on-environ-validation), one it reads is named as not modelled.

Variables with no effect on the prediction (NO_EFFECT_ENV: logging, telemetry, paths, ports) are silent, and
VLLM_ALLOW_LONG_MAX_MODEL_LEN is read by vllm_command.py from the built environment. Only names are checked
here: no variable's value is read.
"""

from __future__ import annotations

from typing import Any

from ttftsim.validate.vllm_args import ParsedCommand
from ttftsim.validate.vllm_flags import words
from ttftsim.validate.vllm_invocation import CommandFinding, VllmCommand

# VLLM_* variables with no effect on what ttftsim predicts (logging, telemetry, where files go, ports)
NO_EFFECT_ENV = words(
    """
VLLM_LOGGING_LEVEL VLLM_CONFIGURE_LOGGING VLLM_LOGGING_CONFIG_PATH VLLM_LOGGING_PREFIX
VLLM_NO_USAGE_STATS VLLM_DO_NOT_TRACK VLLM_USAGE_SOURCE VLLM_CACHE_ROOT VLLM_CONFIG_ROOT
VLLM_ASSETS_CACHE VLLM_HOST_IP VLLM_PORT VLLM_API_KEY VLLM_LOG_STATS_INTERVAL
VLLM_DEBUG_LOG_API_SERVER_RESPONSE VLLM_SERVER_DEV_MODE VLLM_USE_MODELSCOPE VLLM_RPC_TIMEOUT
VLLM_HTTP_TIMEOUT_KEEP_ALIVE VLLM_ENGINE_READY_TIMEOUT_S
"""
)

ENV_NOTES = {
    "VLLM_USE_V1": "VLLM_USE_V1=0 runs the V0 engine, whose scheduler ttftsim does not model (V1's is)",
    "VLLM_ATTENTION_BACKEND": "kernel costs are those of the version's default attention backend",
}


def check_environment(
    env: list[Any], parsed: ParsedCommand, command: VllmCommand, known: frozenset[str], version: str, where: str
) -> None:
    """VLLM_* variables: unknown to this version (vLLM warns and ignores them, or refuses to start with
    --fail-on-environ-validation: vllm/platforms/interface.py validate_environ), or known and not modelled."""
    hard_fail = parsed.value("fail_on_environ_validation") is True
    for entry in env:
        name = str(entry.get("name", "")) if isinstance(entry, dict) else ""
        if not name.startswith("VLLM_") or name in NO_EFFECT_ENV:
            continue
        if name == "VLLM_ALLOW_LONG_MAX_MODEL_LEN" and name in known:  # read from the built environment: vllm_command
            continue
        if name not in known:
            command.findings.append(
                CommandFinding(
                    "error" if hard_fail else "warning",
                    f"{where}: vLLM {version} does not read the environment variable {name}: "
                    + (
                        "with --fail-on-environ-validation it refuses to start"
                        if hard_fail
                        else "it logs 'Unknown vLLM environment variable detected' and ignores it"
                    ),
                    f"remove {name}, or set what it meant with this version's flag",
                )
            )
        else:
            why = ENV_NOTES.get(name, "its effect is not predicted")
            command.findings.append(
                CommandFinding(
                    "warning", f"{where}: environment variable {name} is read by vLLM {version} but not modelled: {why}"
                )
            )
