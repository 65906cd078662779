"""The data folders are found in a checkout and in a wheel's copy (the copy wins when present)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ttftsim import data_paths
from ttftsim.data_paths import DATA_FOLDERS, data_folder


def test_a_checkout_reads_the_folders_beside_the_package() -> None:
    root = Path(__file__).resolve().parents[1]
    for name in DATA_FOLDERS:
        assert data_folder(name) == root / name and (root / name).is_dir()


def test_a_wheel_reads_its_own_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "site-packages" / "ttftsim"
    (package / "_data" / "hwprofiles").mkdir(parents=True)
    (tmp_path / "site-packages" / "web").mkdir()  # someone else's folder beside the installed package
    (package / "_data" / "web").mkdir()
    monkeypatch.setattr(data_paths, "PACKAGE", package)
    assert data_folder("hwprofiles") == package / "_data" / "hwprofiles"
    assert data_folder("web") == package / "_data" / "web"
    assert data_folder("calibration") == tmp_path / "site-packages" / "calibration"  # no copy: the checkout's
