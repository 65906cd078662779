"""Crash-safe result folders (`simulate --out`, `plan --out`). A run's files are written into a staging
folder beside the target (`.<name>.partial-<random>`: hidden, and skipped by readers), and a completion
marker, `complete.json` (the kind of result and each file's size in bytes), is written last.

- A new target: the staging folder, marker included, is renamed into place (one atomic rename).
- An existing target (an older result of the same kind, a plan's checkpoint, files of the user's; a complete
  result of another kind is refused, so that a simulation never removes a plan's manifests): its marker is removed
  first, so that it reads as incomplete; the staged files then replace their namesakes (an atomic rename
  each), the older result's files that the new one lacks are removed, and the marker comes last.

So an interrupted run (Ctrl-C, SIGKILL, an error while writing) leaves the older result as it was, or, if it
is interrupted in the moment the files move, a folder without its marker: never a mixed folder that reads
as complete. Readers (ttftsim/results.py) take a folder as complete only when its marker is there and every
file it lists has the recorded size, which also catches a file rewritten later by something else. Other
files in the target (the plan's checkpoint, a deploy.yaml beside the manifests) are left alone. Left out: a
power cut (files are flushed to disk before the marker is written, but the renames are not)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttftsim.errors import InputError

MARKER = "complete.json"
STAGING = ".partial-"  # in staging folders' names, after the target's: .<name>.partial-<random>


@dataclass(frozen=True)
class Marker:
    """A folder's completion marker: the kind of result ("simulation", "plan") and its files' sizes."""

    kind: str
    files: dict[str, int]


def parse_marker(text: str) -> Marker:
    """The marker's content; ValueError when it is not a marker (file names must be plain names)."""
    data: Any = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str) or not isinstance(data.get("files"), dict):
        raise ValueError("not a completion marker (expected kind and files)")
    files = data["files"]
    for name, size in files.items():
        if name in ("", ".", "..", MARKER) or Path(name).name != name or "\\" in name:
            raise ValueError(f"not a plain file name: {name!r}")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"{name}: size is not a byte count")
    return Marker(data["kind"], dict(files))


def check_target(target: Path, kind: str) -> None:
    """Refuse, before any work, an --out that cannot become a folder (a file, or a path under a file), or a folder
    that holds a complete result of another kind (a plan's manifests would be removed by a simulation's files)."""
    for path in (target, *target.parents):
        if path.is_dir():
            _check_kind(target, kind)
            return
        if path.exists() or path.is_symlink():
            where = "exists and is not a folder" if path == target else f"{path} is not a folder"
            raise InputError(str(target), "", f"{where} (results go to a folder)")


def _check_kind(target: Path, kind: str) -> None:
    try:
        held = parse_marker((target / MARKER).read_text(encoding="utf-8")).kind
    except (OSError, ValueError, RecursionError):
        return  # no marker (a new folder, the user's files, an interrupted run): nothing to lose by kind
    if held != kind:
        raise InputError(
            str(target),
            "",
            f"holds a {held} result; writing a {kind} there would remove its files: give another --out, or remove "
            "the folder first",
        )


@contextmanager
def staged(target: Path, kind: str) -> Iterator[Path]:
    """A staging folder beside target to write the result's files into; when the block ends without an
    exception the result is marked complete and moved into place. On an exception (KeyboardInterrupt
    included) the staging folder is removed and target is left as it was."""
    target = Path(os.path.abspath(target))  # `--out .` has a name, and a parent to stage beside
    check_target(target, kind)
    stage = target.parent / f".{target.name}{STAGING}{secrets.token_hex(4)}"
    try:
        _create(stage)
        yield stage
        _mark(stage, kind)
        if target.is_dir():
            _replace_files(stage, target)
        else:
            stage.rename(target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # gone already after a rename


def _create(stage: Path) -> None:
    try:
        stage.parent.mkdir(parents=True, exist_ok=True)
        stage.mkdir()  # not mkdtemp: its 0700 would become the result's permissions
    except OSError as exc:
        raise InputError(str(stage.parent), "", f"cannot write results here ({exc.strerror})") from None


def _mark(stage: Path, kind: str) -> None:
    """Flush every staged file to disk, then write the marker listing them with their sizes."""
    files: dict[str, int] = {}
    for path in sorted(stage.iterdir()):
        with path.open("rb") as handle:
            os.fsync(handle.fileno())
        files[path.name] = path.stat().st_size
    text = json.dumps({"kind": kind, "files": files}, indent=1, sort_keys=True) + "\n"
    (stage / MARKER).write_text(text, encoding="utf-8")


def _replace_files(stage: Path, target: Path) -> None:
    """Move the staged files over an existing folder: marker off first, on last (see the module's doc)."""
    marker = target / MARKER
    try:
        previous = parse_marker(marker.read_text(encoding="utf-8")).files
    except (OSError, ValueError, RecursionError):
        previous = {}
    marker.unlink(missing_ok=True)
    names = sorted(path.name for path in stage.iterdir() if path.name != MARKER)
    for name in names:
        os.replace(stage / name, target / name)
    for name in previous.keys() - set(names):  # e.g. the manifests of a plan that now has no winner
        (target / name).unlink(missing_ok=True)
    os.replace(stage / MARKER, marker)
