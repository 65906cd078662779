"""The files a workload names (a trace, files of lengths), checked before anything runs: one that is not there is
the error of the field that names it, in the scenario's (plan's, deploy file's) own file. The readers
(workload/traces.py, workload/lengths.py) would name the missing file alone."""

from __future__ import annotations

from pathlib import Path

from ttftsim.config.workload import EmpiricalLength, TraceWorkload, Workload
from ttftsim.errors import InputError
from ttftsim.inputs.files import is_file


def check_files(workload: Workload, base: Path, source: str, field: str) -> None:
    """The files a workload names (a trace, a file of lengths), relative to its own file (`source`, in `base`): one
    that is not there is the error of the field naming it, found before anything runs (the reader would name the
    missing file alone)."""
    named = [("path", workload.path)] if isinstance(workload, TraceWorkload) else []
    for name in type(workload).model_fields:
        if isinstance(value := getattr(workload, name), EmpiricalLength):
            named.append((f"{name}.path", value.path))
    for name, path in named:
        if not is_file(base / path):
            raise InputError(source, f"{field}.{name}", f"no such file {base / path}")
