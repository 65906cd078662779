"""The import contracts (.importlinter) hold, and they catch what they are there to catch: a copy of the
package with one forbidden import added breaks the contract that names it. Every top-level module has a
place in the layers, and every folder of modules is a regular package (import-linter does not see into a
folder without an __init__.py, so its imports would escape every contract)."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = ROOT / ".importlinter"


def lint_imports(cwd: Path, *contracts: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    """lint-imports with the repository's contracts (only the named ones, if any), without a cache."""
    run_cli = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    command = [sys.executable, "-c", run_cli]
    command += ["--config", str(CONTRACTS), "--no-cache", "--no-logo"]
    for contract in contracts:
        command += ["--contract", contract]
    env = dict(os.environ)
    if pythonpath is not None:  # ahead of the editable install: the copy is the package analysed
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_contracts_are_kept() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("perf/batch.py", "import ttftsim.engine", "perf-without-engine"),
        ("perf/batch.py", "import ttftsim.engine", "layers"),
        ("config/base.py", "import ttftsim.simulate", "config-schemas-only"),
        ("engine/engine.py", "import ttftsim.metrics.summary", "layers"),
        ("docs.py", "import ttftsim.cli", "no-cycles"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(tmp_path: Path, module: str, line: str, contract: str) -> None:
    package = tmp_path / "ttftsim"
    shutil.copytree(ROOT / "ttftsim", package, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    kept = lint_imports(tmp_path, contract, pythonpath=tmp_path)
    assert kept.returncode == 0, kept.stdout + kept.stderr  # the copy itself keeps the contract
    target = package / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    broken = lint_imports(tmp_path, contract, pythonpath=tmp_path)
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert "BROKEN" in broken.stdout


def test_every_top_level_module_has_a_layer() -> None:
    config = configparser.ConfigParser()
    config.read(CONTRACTS, encoding="utf-8")
    layered = {
        name.strip()
        for layer in config["importlinter:contract:layers"]["layers"].split("\n")
        for name in layer.split("|")
        if name.strip()
    }
    package = ROOT / "ttftsim"
    top_level = {f"ttftsim.{p.stem}" for p in package.glob("*.py") if p.name != "__init__.py"}
    top_level |= {f"ttftsim.{p.parent.name}" for p in package.glob("*/__init__.py")}
    unplaced, gone = sorted(top_level - layered), sorted(layered - top_level)
    assert not unplaced, f"place {unplaced} in a layer of .importlinter (and say why in its comment)"
    assert not gone, f"{gone} no longer exist: take them out of .importlinter's layers"


def test_every_folder_of_modules_is_a_package() -> None:
    folders = {p.parent for p in (ROOT / "ttftsim").rglob("*.py") if "__pycache__" not in p.parts}
    assert [str(f) for f in sorted(folders) if not (f / "__init__.py").exists()] == []
