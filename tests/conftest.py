"""Shared fixtures: the reference data folder (skipped with a reason when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttftsim.shared_data import shared_dir


@pytest.fixture(scope="session")
def shared() -> Path:
    folder = shared_dir()
    if folder is None:
        pytest.skip("../shared (or $TTFTSIM_SHARED) is absent: reference data not available")
    return folder
