"""Run facts: what two runs of the same inputs and seed need not share (the wall time of a simulation, the
tasks a plan computed or took from its checkpoint). They never go into `--json` output, summary.json or
plan.json, which stay identical byte for byte; they go to run.json in the same folder, and into the
human-readable output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RUN_FILE = "run.json"


def write_run_info(folder: Path, facts: dict[str, Any]) -> Path:
    """Write the run facts to folder/run.json (the folder exists: the results were written there)."""
    path = folder / RUN_FILE
    path.write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
