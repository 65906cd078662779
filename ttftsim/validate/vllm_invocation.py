"""The container's vLLM invocation as ttftsim reads it (VllmCommand) and what reading it finds (CommandFinding):
the value read_vllm_container (vllm_command.py) builds, with vllm_flags.py, vllm_checks.py and vllm_env.py. No
reading here: a flag read by vLLM but not modelled is only recorded, once, as written (pod_checks.py warns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CommandFinding:
    """One thing the command line or environment does that validate reports."""

    severity: str  # error, warning, info
    message: str
    fix: str = ""


@dataclass
class VllmCommand:
    """The container's vLLM invocation as ttftsim reads it."""

    model: str | None
    engine: dict[str, Any]
    pipeline_parallel: int
    not_modelled: list[str] = field(default_factory=list)  # flags as written, read by vLLM, not modelled
    findings: list[CommandFinding] = field(default_factory=list)


def note_not_modelled(command: VllmCommand, written: str) -> None:
    """validate warns about each one (pod_checks.py not_modelled), naming the flag as written."""
    if written not in command.not_modelled:
        command.not_modelled.append(written)
