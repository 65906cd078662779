"""Which modules are compiled with mypyc (setup.py), and a guard against stale compiled modules.

A compiled module (ttftsim/engine/engine.cpython-*.so) is imported in preference to its source. After
an edit to a source file of an editable install, the compiled module would silently run the old code;
`use_sources_if_stale` sees that (the source's checksum differs from the one the build recorded) and
loads every compiled module from its source instead, with a warning to reinstall. TTFTSIM_PURE_PYTHON=1
does the same on purpose (to profile or debug the engine as plain Python). All or none: compiled modules
call each other's classes directly, so a mix cannot run. The package runs the guard when it is
imported, before any compiled module can load: the one thing ttftsim does at import time (reading the
compiled modules' sources, about a millisecond).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

COMPILED = (
    "calibration.costs",
    "calibration.curves",
    "calibration.splines",
    "engine.api_server",
    "engine.cohort",
    "engine.deadlines",
    "engine.decode_run",
    "engine.engine",
    "engine.feed",
    "engine.loading",
    "engine.lora",
    "engine.pipeline",
    "engine.queues",
    "engine.recorder",
    "engine.scheduler",
    "engine.speculative",
    "engine.state",
    "engine.step_plan",
    "engine.visible",
    "engine.waits",
    "kvcache.block_pool",
    "kvcache.hashing",
    "kvcache.manager",
    "kvcache.offload",
    "kvcache.windowed",
    "perf.attention",
    "perf.batch",
    "perf.cudagraph",
    "perf.deployment",
    "perf.ffn",
    "perf.iteration",
    "perf.kernels",
    "perf.linear",
    "perf.mla",
    "workload.request",
)
PACKAGE = Path(__file__).resolve().parent
MANIFEST = "_compiled.json"  # written by the build: the checksum of each compiled module's source


def source_path(package: Path, name: str) -> Path:
    """The source file of a module named relative to the package (engine.engine -> engine/engine.py)."""
    return package / f"{name.replace('.', '/')}.py"


def compiled_path(source: Path) -> Path | None:
    """The compiled module built from a source file, if there is one."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_suffix(suffix)
        if candidate.exists():
            return candidate
    return None


def is_compiled() -> bool:
    """Whether the engine runs compiled (the speed benchmark reports it)."""
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
        return importlib.util.spec_from_file_location(fullname, source_path(PACKAGE, fullname.partition(".")[2]))


def source_checksum(source: Path) -> int:
    """What identifies a source's content (a CRC: edits, not attacks, are what it must tell apart)."""
    return zlib.crc32(source.read_bytes())


def source_checksums(sources: Path, names: Sequence[str]) -> dict[str, int]:
    """The checksums of the sources about to be compiled: taken when the compiler reads them, so a source
    edited while the build runs is recorded as it was compiled (and found stale at import)."""
    return {name: source_checksum(source_path(sources, name)) for name in names}


def write_manifest(manifest: Path, sums: dict[str, int]) -> None:
    """At build time, once compiled: the checksums of the compiled sources (the package's MANIFEST)."""
    manifest.write_text(json.dumps(sums, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def stale_modules(package: Path, names: Sequence[str]) -> list[str] | None:
    """The modules not compiled, or whose source differs from the one compiled (its checksum in the build's
    manifest; file times cannot tell, as installers rewrite them); None when nothing was compiled."""
    sources = {name: source_path(package, name) for name in names}
    built = {name: compiled_path(source) for name, source in sources.items()}
    if not any(built.values()):
        return None
    manifest = package / MANIFEST
    sums: dict[str, int] = json.loads(manifest.read_text(encoding="utf-8")) if manifest.exists() else {}
    return [
        name for name, source in sources.items() if built[name] is None or sums.get(name) != source_checksum(source)
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
