"""Build hook: the engine's hot modules are compiled with mypyc (the same typed Python, about twice as fast).

Set TTFTSIM_PURE_PYTHON=1 when installing to skip it; without a working C compiler and Python headers it
is skipped too. The package then runs as plain Python, with the same results. The list of compiled
modules lives in ttftsim/_native.py, which also keeps an edited source from being shadowed by a stale
compiled module.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "ttftsim"))  # _native and data_paths: standard library only, no package import

import _native  # noqa: E402
from data_paths import DATA_FOLDERS  # noqa: E402

COMPILED_SUMS: dict[str, int] = {}  # each compiled source's checksum when mypyc read it (BuildExt records them)


def c_compiler_works() -> bool:
    """Whether the C compiler Python builds extensions with can compile against Python.h."""
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    with tempfile.TemporaryDirectory() as scratch:
        probe = Path(scratch) / "probe.c"
        probe.write_text("#include <Python.h>\nint main(void) { return 0; }\n", encoding="utf-8")
        command = [*shlex.split(compiler), "-I", sysconfig.get_paths()["include"], "-c", str(probe)]
        try:
            return subprocess.run(command, cwd=scratch, capture_output=True, check=False).returncode == 0
        except OSError:
            return False


def ext_modules() -> list[object]:
    if os.environ.get("TTFTSIM_PURE_PYTHON"):
        return []
    if not c_compiler_works():
        print("warning: no working C compiler: ttftsim is installed as plain Python (slower)", file=sys.stderr)
        return []
    from mypyc.build import mypycify

    # The build environment has numpy (pyproject's build requirements) but not the other runtime
    # dependencies, nor the pydantic mypy plugin the project's own mypy settings name: their types are
    # Any here (`mypy` in CI checks them strictly). A fresh cache: a developer's .mypy_cache must not
    # decide what compiles.
    paths = [str(_native.source_path(Path("ttftsim"), name)) for name in _native.COMPILED]
    COMPILED_SUMS.update(_native.source_checksums(ROOT / "ttftsim", _native.COMPILED))  # as mypyc reads them
    with tempfile.TemporaryDirectory() as scratch:
        config = Path(scratch) / "mypy.ini"
        config.write_text(
            f"[mypy]\nignore_missing_imports = True\nfollow_imports = silent\ncache_dir = {scratch}/cache\n",
            encoding="utf-8",
        )
        return mypycify(["--config-file", str(config), *paths], opt_level="3", group_name="ttftsim")


class BuildExt(build_ext):
    """Compiles, then records the checksum each compiled source had when mypyc read it (_native.MANIFEST) for
    the guard that compares the sources with it at import: a source edited during the build is stale. Recorded
    last: a build that fails leaves the old record, so edited sources run as plain Python rather than beside
    stale compiled modules."""

    def run(self) -> None:
        super().run()
        if not self.extensions:
            return
        package = ROOT / "ttftsim" if self.inplace or self.editable_mode else Path(self.build_lib) / "ttftsim"
        _native.write_manifest(package / _native.MANIFEST, COMPILED_SUMS)


class BuildPy(build_py):
    """A wheel carries the repository's data folders (hardware profiles, calibration, the dashboard)
    inside the package, as ttftsim/_data/<folder> (ttftsim/data_paths.py finds them); an editable
    install reads them in the checkout."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        skip = shutil.ignore_patterns("__pycache__", "*.pyc")
        for name in DATA_FOLDERS:
            shutil.copytree(
                ROOT / name, Path(self.build_lib) / "ttftsim" / "_data" / name, ignore=skip, dirs_exist_ok=True
            )


setup(ext_modules=ext_modules(), cmdclass={"build_py": BuildPy, "build_ext": BuildExt})
