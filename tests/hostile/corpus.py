"""Run one hostile-input case the way a user meets it, in this process: `ttftsim.cli.main()` with the case's
arguments, from a copy of its folder, stdout and stderr captured, SystemExit's code taken as the exit code.

In-process rather than a subprocess per case: a fresh interpreter pays ~1.5 s of imports, which for 250 cases
on CI's 2 cores would be minutes; in one process the cases take a fraction of a second each. What a subprocess
would add is checked elsewhere (tests/test_cli.py runs `python -m ttftsim` for the one-line error path). A case
that runs past its time is stopped by SIGALRM (raised as CaseTimeout, which no `except Exception` in the
program swallows); the limit variables a case or `--max-requests` set are restored after it."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import sqlite3
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CASES = HERE / "cases"
INDEX = HERE / "cases.yaml"
CASE_SECONDS = 10.0  # each case, on CI's 2 cores; a hang is stopped at twice that


class CaseTimeout(BaseException):
    """Raised in the case by SIGALRM (a BaseException: the program's `except Exception` lets it through)."""


@dataclass(frozen=True)
class Outcome:
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    crash: str = ""  # the traceback of an exception that escaped main(), or "timeout"


def load_index() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = yaml.safe_load(INDEX.read_text(encoding="utf-8"))
    return cases


def prepare(case: dict[str, Any], work: Path) -> Path:
    """A writable copy of the case's folder, with what git cannot hold made by its `setup`."""
    folder = work / "case"
    shutil.copytree(CASES / case["id"], folder, symlinks=True)
    setup = case.get("setup", "")
    kind, _, arg = setup.partition(":")
    if kind == "fifo":
        os.mkfifo(folder / arg)
    elif kind == "loop":
        first, second = arg.split(",")
        (folder / first).symlink_to(second)
        (folder / second).symlink_to(first)
    elif kind == "checkpoint":
        _checkpoint(folder / "res" / "checkpoint.sqlite", arg)  # res/: out/ is git-ignored
    return folder


def _checkpoint(path: Path, kind: str) -> None:
    """A plan checkpoint gone wrong: another plan's, a value that is not JSON or not an object, other tables."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    if kind == "wrong-schema":
        db.execute("CREATE TABLE notes (text TEXT)")
    else:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        db.execute("CREATE TABLE results (key TEXT PRIMARY KEY, value TEXT)")
        digest = "another plan" if kind == "other" else _digest(path.parent.parent / "plan.yaml")
        db.execute("INSERT INTO meta VALUES ('plan', ?)", (digest,))
        value = "{not json" if kind == "bad-json" else "[1, 2, 3]"
        db.execute("INSERT INTO results VALUES ('bound|x|0.0', ?)", (value,))
    db.commit()
    db.close()


def _digest(plan_path: Path) -> str:
    from ttftsim.plan.evaluate import plan_digest
    from ttftsim.plan.run import load_plan

    return plan_digest(load_plan(plan_path))


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise CaseTimeout()


def run(case: dict[str, Any], folder: Path) -> Outcome:
    """The case's command run in `folder` by the CLI's own entry point."""
    from ttftsim import cli

    saved_env, saved_cwd, saved_argv, saved_show = dict(os.environ), Path.cwd(), sys.argv, warnings.showwarning
    os.environ.update(case.get("env", {}))
    out, err = io.StringIO(), io.StringIO()
    code: int | None = None
    crash = ""
    previous = signal.signal(signal.SIGALRM, _alarm)
    started = time.perf_counter()
    try:
        os.chdir(folder)
        sys.argv = ["ttftsim", *case["run"]]
        signal.setitimer(signal.ITIMER_REAL, 2 * CASE_SECONDS)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except CaseTimeout:
        crash = "timeout"
    except Exception:
        crash = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(saved_cwd)
        sys.argv, warnings.showwarning = saved_argv, saved_show
        os.environ.clear()
        os.environ.update(saved_env)
    return Outcome(code, out.getvalue(), err.getvalue(), time.perf_counter() - started, crash)


def problems(case: dict[str, Any], outcome: Outcome) -> list[str]:
    """What is wrong with the outcome: empty when the case behaves as the index says."""
    if outcome.crash:
        return [f"crashed: {outcome.crash.strip().splitlines()[-1]}"]
    found = []
    if "Traceback" in outcome.stderr:
        found.append("a traceback on stderr")
    if outcome.code != case["exit"]:
        found.append(f"exit {outcome.code}, expected {case['exit']}: {outcome.stderr.strip()[:300]}")
    if case["exit"] == 2 and outcome.code == 2:
        lines = [line for line in outcome.stderr.strip().splitlines() if not line.startswith("warning:")]
        if len(lines) != 1:
            found.append(f"{len(lines)} lines on stderr, expected one: {outcome.stderr[:300]!r}")
        elif case["names"] not in lines[0]:
            found.append(f"the error does not name {case['names']}: {lines[0][:300]}")
        elif len(lines[0]) > 1000:
            found.append(f"the error is {len(lines[0])} characters long")
    if case.get("says") and case["says"] not in outcome.stderr:
        found.append(f"stderr does not say {case['says']!r}: {outcome.stderr[:300]}")
    if outcome.seconds > CASE_SECONDS:
        found.append(f"took {outcome.seconds:.1f} s (limit {CASE_SECONDS:.0f} s)")
    return found
