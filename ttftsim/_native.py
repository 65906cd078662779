"""Which modules are compiled with mypyc (setup.py), and a guard against stale compiled modules.

A compiled module (ttftsim/engine/engine.cpython-*.so) is imported in preference to its source. After
an edit to a source file of an editable install, the compiled module would silently run the old code;
`use_sources_if_stale` sees that (a source newer than its compiled module) and loads every compiled
module from its source instead, with a warning to reinstall. TTFTSIM_PURE_PYTHON=1 does the same on
purpose (to profile or debug the engine as plain Python). All or none: compiled modules call each
other's classes directly, so a mix cannot run. The package runs the guard when it is imported, before
any compiled module can load: the one thing ttftsim does at import time (a few file stats).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

COMPILED = (
    "calibration.costs",
    "calibration.curves",
    "calibration.splines",
    "engine.cohort",
    "engine.engine",
    "engine.queues",
    "engine.scheduler",
    "engine.state",
    "kvcache.block_pool",
    "kvcache.hashing",
    "kvcache.manager",
    "metrics.recorder",
    "perf.batch",
    "perf.iteration",
    "perf.kernels",
    "perf.linear",
    "workload.request",
)
PACKAGE = Path(__file__).resolve().parent


def compiled_path(source: Path) -> Path | None:
    """The compiled module built from a source file, if there is one."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_suffix(suffix)
        if candidate.exists():
            return candidate
    return None


def is_compiled() -> bool:
    """Whether the engine runs compiled (what `ttftsim --version` and the speed benchmark report)."""
    module = sys.modules.get("ttftsim.engine.engine")
    return module is not None and not (module.__file__ or "").endswith(".py")


class _SourceFinder:
    """Finds the compiled modules' sources, ahead of the compiled modules (a sys.meta_path finder; not
    derived from importlib.abc, whose import costs more than everything else here)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_file_location(fullname, PACKAGE / f"{fullname[8:].replace('.', '/')}.py")


def stale_modules(package: Path, names: Sequence[str]) -> list[str] | None:
    """The modules whose source is newer than their compiled module, or that were not compiled; None
    when nothing was compiled (a plain Python install)."""
    sources = {name: package / f"{name.replace('.', '/')}.py" for name in names}
    built = {name: compiled_path(source) for name, source in sources.items()}
    if not any(built.values()):
        return None
    return [
        name for name, path in built.items() if path is None or sources[name].stat().st_mtime > path.stat().st_mtime
    ]


def use_sources_if_stale() -> None:
    stale = stale_modules(PACKAGE, COMPILED)
    if stale is None or (not stale and not os.environ.get("TTFTSIM_PURE_PYTHON")):
        return
    if stale:
        warnings.warn(
            f"ttftsim: {', '.join(stale)} changed since it was compiled; running all engine modules as plain "
            "Python (slower). Reinstall (pip install -e .) to compile them again.",
            stacklevel=2,
        )
    sys.meta_path.insert(0, _SourceFinder({f"ttftsim.{name}" for name in COMPILED}))
