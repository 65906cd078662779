"""Locate the team's shared reference data (../shared or $TTFTSIM_SHARED); never part of the project."""

from __future__ import annotations

import os
from pathlib import Path


def shared_dir() -> Path | None:
    """The shared folder if it exists: $TTFTSIM_SHARED, else ../shared beside the repository."""
    override = os.environ.get("TTFTSIM_SHARED")
    candidates = [Path(override)] if override else []
    candidates.append(Path(__file__).resolve().parents[2] / "shared")
    candidates.append(Path.cwd().parent / "shared")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    return None
