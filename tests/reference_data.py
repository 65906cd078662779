"""The team's reference data (../shared or $TTFTSIM_SHARED) for tests that need it: on a user's fresh clone
without it those tests skip with the reason; in CI (CI=true) its absence is a failure, never a silent skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ttftsim.shared_data import shared_dir

ABSENT = "../shared (or $TTFTSIM_SHARED) is absent: reference data not available"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require_shared(what: str = "") -> Path:
    """The shared folder, or skip (a user's machine) / fail (CI) saying what needed it."""
    folder = shared_dir()
    if folder is None:
        reason = f"{ABSENT}{f' ({what})' if what else ''}"
        if in_ci():
            pytest.fail(f"CI=true: {reason}", pytrace=False)
        pytest.skip(reason)
    return folder
