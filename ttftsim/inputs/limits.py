"""The limits every input is held to (docs/inputs.md): how big a file may be, how deep and how large a YAML or
JSON document may expand, and how much work a run may ask for. Each has a default and an environment variable
that raises it (TTFTSIM_MAX_<NAME>; the number of requests also `--max-requests`); the error that refuses an
input says which limit and how to raise it."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace

from ttftsim.errors import InputError

MB = 1_000_000
INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Limits:
    """Defaults sized for what a user means to run on a laptop; every one is raised by its variable."""

    file_bytes: int = 20 * MB  # scenario, plan, deploy, manifests, config.json, profiles, ground truth, results
    trace_bytes: int = 2_000 * MB  # traces and empirical length files
    trace_rows: int = 10_000_000  # rows of one trace
    nodes: int = 1_000_000  # values in one YAML/JSON document, aliases expanded (billion laughs)
    depth: int = 64  # nesting of one YAML/JSON document
    requests: int = 2_000_000  # requests one simulation may send (each of a plan's probes, each compare side)
    tokens: int = 10_000_000  # prompt or output tokens of one request
    pods: int = 1_000  # serving pods of one cluster: replicas, warm pool, HPA maximum, prefill pods, nodes
    turns: int = 1_000  # turns of one conversation
    prompts: int = 1_000_000  # distinct prompts generated up front (dataset entries, shared-prefix groups)
    candidates: int = 10_000  # deployments one plan searches
    kv_blocks: int = 10_000_000  # KV-cache blocks of one replica
    ticks: int = 10_000_000  # periodic steps of one run: time-series windows, HPA syncs, scrapes, refreshes

    @staticmethod
    def variable(name: str) -> str:
        return f"TTFTSIM_MAX_{name.upper()}"

    def how_to_raise(self, name: str) -> str:
        extra = "--max-requests N or " if name == "requests" else ""
        return f"raise it with {extra}{self.variable(name)}=N"


def current_limits() -> Limits:
    """The defaults, with each TTFTSIM_MAX_<NAME> set in the environment applied (read on every call, so that
    a plan's worker processes see what the command line set)."""
    limits = Limits()
    for item in fields(Limits):
        raw = os.environ.get(Limits.variable(item.name))
        if raw is None or raw == "":
            continue
        try:
            value = int(raw.replace("_", ""))
        except ValueError:
            value = 0
        if not 1 <= value <= INT64_MAX:
            raise InputError(Limits.variable(item.name), "", f"expects a positive integer, got {raw[:40]!r}")
        limits = replace(limits, **{item.name: value})
    return limits


def set_request_limit(value: int | None) -> None:
    """--max-requests: the command line's value for this process and the workers it starts."""
    if value is not None:
        os.environ[Limits.variable("requests")] = str(value)
