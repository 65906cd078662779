"""The entry point: user errors become one line on stderr and exit code 2, Ctrl-C one line and 130."""

from __future__ import annotations

import atexit
import gc
import json
import signal
import sys
import warnings
from typing import Any

import typer

from ttftsim.cli.app import app, pipe_closed, stdout_gone
from ttftsim.errors import InputError
from ttftsim.heap import map_large_blocks
from ttftsim.perf.memory import DoesNotFitError


def _fail(line: str) -> None:
    sys.stderr.write(line.replace("\n", " ") + "\n")


def _error(line: str) -> None:
    """An error's one line on stderr; with --json also `{"error": ...}` on stdout, so a CI step that parses the
    JSON gets a document saying why (the exit code is 2 either way)."""
    _fail(line)
    if "--json" in sys.argv[1:] and not stdout_gone():  # (nobody to read it: the line on stderr says it)
        sys.stdout.write(json.dumps({"error": line.removeprefix("error: ").replace("\n", " "), "exit_code": 2}) + "\n")


def _warn_one_line(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    _fail(f"warning: {message}")


def main() -> None:
    """Entry point: user errors become one line on stderr and exit code 2 (usage errors too);
    warnings (e.g. a shape outside the calibrated range) one line each. At exit the garbage collector's
    last full pass over everything still alive is skipped (gc.freeze): a tenth of a second after a large
    run, and the process is ending anyway (atexit handlers and open files still close as usual)."""
    warnings.showwarning = _warn_one_line
    signal.signal(signal.SIGTERM, _terminate)
    atexit.register(gc.freeze)
    map_large_blocks()  # memory a long run frees goes back to the system (ttftsim/heap.py)
    try:
        code = app(standalone_mode=False)  # click's errors come here as exceptions, not as a framed box
        sys.stdout.flush()  # a reader gone (`| head`) is found here, not when the interpreter exits
    except typer.Abort:  # end of input at a prompt
        _interrupted()
    except SystemExit as exc:
        _exiting(exc)
        raise
    except InputError as exc:
        from ttftsim.cli.file_kinds import with_kind_hint  # the three file kinds' schemas: 10 ms, on an error only

        _error(f"error: {with_kind_hint(exc).one_line()}")
        sys.exit(2)
    except DoesNotFitError as exc:
        _error(f"error: does not fit: {exc}")
        sys.exit(2)
    except OSError as exc:
        _system_refused(exc)
    except Exception as exc:
        _usage_error(exc)
        raise
    if code == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into Exit(130), here a return value
        _interrupted()
    if isinstance(code, int) and code:  # a command's typer.Exit(code)
        sys.exit(code)


def _exiting(exc: SystemExit) -> None:
    """A command's own exit, seen on its way out: Ctrl-C inside a command that exits 130 itself is said in one line;
    click's exit 1 for a write to a reader gone (`| head`) becomes PIPE_CLOSED (1 says an SLO was missed)."""
    if exc.code == 130:
        _interrupted()
    if isinstance(exc.__context__, BrokenPipeError) and stdout_gone():
        pipe_closed()


def _system_refused(exc: OSError) -> None:
    """A path the user gave that the system refuses (a name too long, no permission): one line, exit 2; standard
    output's reader gone (JSON written to `| head -c 100`): PIPE_CLOSED, quietly."""
    if isinstance(exc, BrokenPipeError) and stdout_gone():
        pipe_closed()
    where = InputError(str(exc.filename or "input"), "", exc.strerror or exc.__class__.__name__)
    _error(f"error: {where.one_line()}")
    sys.exit(2)


def _usage_error(exc: Exception) -> None:
    """Click's usage errors (an unknown option or command, a bad or missing value; typer vendors click, so
    the classes are known by name) as one line and exit 2; a bare command prints its help, exit 2."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if "UsageError" not in names:
        return
    ctx = getattr(exc, "ctx", None)
    if "NoArgsIsHelpError" in names and ctx is not None:
        typer.echo(ctx.get_help(), err=True)
        sys.exit(2)
    where = ctx.command_path if ctx is not None else "ttftsim"
    _error(f"error: {where}: {exc.format_message()} (see {where} --help)")  # type: ignore[attr-defined]
    sys.exit(2)


TERMINATED: list[int] = []  # the signal that stopped the run, when SIGTERM did (a pod deleted, a job cancelled)


def _terminate(signum: int, _frame: object) -> None:
    """SIGTERM (Kubernetes stopping a pod, a CI job cancelled) ends the run as Ctrl-C does: the plan's checkpoint
    is closed in order and the process exits 128 + 15, the code a shell gives a process SIGTERM ended."""
    TERMINATED.append(signum)
    raise KeyboardInterrupt


def _interrupted() -> None:
    _fail("interrupted: results are written only once complete; a plan keeps its checkpoint (--resume)")
    sys.exit(128 + TERMINATED[0] if TERMINATED else 130)
