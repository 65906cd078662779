"""Generated docs match the schemas and the CLI (the drift check CI relies on), and the schemas validate."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.test_cli import run

ROOT = Path(__file__).resolve().parents[1]


def test_committed_docs_are_current() -> None:
    result = run("schema", "--check", "--docs", str(ROOT / "docs"))
    assert result.returncode == 0, result.stdout


def test_drift_is_detected_and_schemas_are_written(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    (docs / "config.md").write_text((docs / "config.md").read_text().replace("Requests per second", "Req/s"))
    result = run("schema", "--check", "--docs", str(docs))
    assert result.returncode == 1 and "config.md" in result.stdout
    assert run("schema", "--docs", str(docs), "--out", str(tmp_path / "schemas")).returncode == 0
    assert run("schema", "--check", "--docs", str(docs)).returncode == 0
    plan = json.loads((tmp_path / "schemas" / "plan.schema.json").read_text())
    assert {"model", "workload", "slo", "search"} <= set(plan["required"])
    assert plan["additionalProperties"] is False  # unknown fields are errors, as the loader says


def test_schema_out_writes_only_the_schemas_wherever_it_runs(tmp_path: Path) -> None:
    """A user's own docs/config.md in the working folder is left alone (`--out` used to rewrite ./docs too), and
    with nothing to write the command says so (exit 2) instead of writing ttftsim's docs into the folder."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "config.md").write_text("mine\n")
    command = [sys.executable, "-m", "ttftsim", "schema"]
    result = subprocess.run([*command, "--out", "schemas"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "docs" / "config.md").read_text() == "mine\n" and not (tmp_path / "docs" / "cli.md").exists()
    assert (tmp_path / "schemas" / "scenario.schema.json").exists()
    bare = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2 and "nothing to write" in bare.stderr and "Traceback" not in bare.stderr
    assert bare.stderr.count("\n") == 1
