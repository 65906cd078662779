"""Tests that need ../shared skip on a user's clone without it, and fail in CI (CI=true)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import reference_data


@pytest.fixture
def no_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference_data, "shared_dir", lambda: None)


@pytest.mark.usefixtures("no_shared")
def test_a_users_clone_skips_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"\.\./shared .* is absent.*accuracy bar"):
        reference_data.require_shared("accuracy bar")


@pytest.mark.usefixtures("no_shared")
def test_ci_fails_instead_of_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI=true: \.\./shared"):
        reference_data.require_shared()


def test_present_data_is_returned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reference_data, "shared_dir", lambda: tmp_path)
    assert reference_data.require_shared() == tmp_path
