"""Where the repository's data folders are: hardware profiles, calibration (fits and the device sweep),
and the dashboard (web/).

A checkout or an editable install reads them beside the package. A wheel carries copies inside it
(ttftsim/_data/<folder>, put there by setup.py's build step), so `pip install .` works without the
checkout; the copy is preferred when present (a folder named `web` beside an installed package could be
anyone's).
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
DATA_FOLDERS = ("hwprofiles", "calibration", "web")


def data_folder(name: str) -> Path:
    """One of DATA_FOLDERS: the copy inside an installed wheel, else the checkout's."""
    packaged = PACKAGE / "_data" / name
    return packaged if packaged.is_dir() else PACKAGE.parent / name
