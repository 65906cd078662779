"""Shared fixtures: the reference data folder (skipped with a reason when absent; a failure in CI)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reference_data import require_shared


@pytest.fixture(scope="session")
def shared() -> Path:
    return require_shared()
