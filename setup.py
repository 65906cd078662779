"""Build hook: the engine's hot modules are compiled with mypyc (the same typed Python, about twice as fast).

Set TTFTSIM_PURE_PYTHON=1 when installing to skip it; the package then runs as plain Python, with the
same results. The list of compiled modules lives in ttftsim/_native.py, which also keeps an edited source
from being shadowed by a stale compiled module.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent


def ext_modules() -> list[object]:
    if os.environ.get("TTFTSIM_PURE_PYTHON"):
        return []
    from mypyc.build import mypycify

    sys.path.insert(0, str(ROOT / "ttftsim"))
    from _native import COMPILED

    # The build environment has none of the runtime dependencies (nor the pydantic mypy plugin the
    # project's own mypy settings name): third-party types are Any here; `mypy` in CI checks them strictly.
    config = Path(tempfile.mkdtemp()) / "mypy.ini"
    config.write_text("[mypy]\nignore_missing_imports = True\nfollow_imports = silent\n", encoding="utf-8")
    paths = [f"ttftsim/{name.replace('.', '/')}.py" for name in COMPILED]
    return mypycify(["--config-file", str(config), *paths], opt_level="3", group_name="ttftsim")


setup(ext_modules=ext_modules())
