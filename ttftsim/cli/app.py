"""The typer app every command module registers on, the console, and what several commands share (options,
progress bars, a deployment from --model/--hardware options, the request limit, one-line stderr)."""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, get_args

import typer
from rich.console import Console

from ttftsim.config.dtypes import KvDtype, WeightDtype
from ttftsim.errors import InputError
from ttftsim.hardware.catalog import load_hardware
from ttftsim.model.catalog import load_model
from ttftsim.perf.iteration import Deployment

app = typer.Typer(
    name="ttftsim",
    help="Predict the time-to-first-token distribution of an LLM serving deployment before it exists.",
    no_args_is_help=True,
    add_completion=False,
)
PIPE_CLOSED = 141  # the exit status a shell reports for a process killed by SIGPIPE (128 + 13)


def pipe_closed() -> None:
    """The reader of standard output went away (`ttftsim plan ... | head`): stop quietly with PIPE_CLOSED, never 1,
    which says an SLO was missed (or no candidate meets them). Later writes go to /dev/null (Python's own advice,
    docs.python.org library/signal.html, note on SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(PIPE_CLOSED)


def stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader went away (its write end polls an error): a broken pipe
    elsewhere (a worker's) is an error to report, not this."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLERR)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError):  # no file descriptor (a test's captured output)
        return False


class _Console(Console):
    """The console on standard output: a write that finds its reader gone ends the run as pipe_closed does (rich's
    own handler exits 1, after pointing standard output at /dev/null, which leaves stdout_gone nothing to see)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        pipe_closed()


def _piped_width() -> int:
    """Tables' width when standard output is not a terminal: 160, or COLUMNS where it asks for more (a log has
    no screen to fit; a narrower table would only cut the candidates' names)."""
    columns = os.environ.get("COLUMNS", "")
    return max(160, int(columns)) if columns.isdigit() else 160


# piped (a CI log): sentences on one line each, for grep; tables at least 160 wide
console = _Console() if sys.stdout.isatty() else _Console(width=_piped_width(), soft_wrap=True)
WeightDtypeOption = Annotated[
    str | None,
    typer.Option(help="bf16, fp16, fp8, int8 or int4 (default: the checkpoint's; fp8 for an id ending in -FP8)"),
]
MaxRequests = Annotated[
    int | None,
    typer.Option(help="Most requests one simulation may send (default 2,000,000; docs/inputs.md lists every limit)"),
]


@contextmanager
def progress_bar(enabled: bool) -> Iterator[Callable[[float], None] | None]:
    """A progress bar on stderr for long runs (only on a terminal)."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("simulating", total=1.0)
        yield lambda fraction: bar.update(task, completed=fraction)


@contextmanager
def phase_progress(enabled: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """A progress bar per phase on stderr, `update(phase, done, total)` (only on a terminal): a plan's phases, the
    measured runs `accuracy` simulates."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, object] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(phase, total=total)
            bar.update(tasks[phase], completed=done, total=total)  # type: ignore[arg-type]

        yield update


def deployment_from_options(
    model: str, gpu: str, tp: int, weight_dtype: str | None, kv_dtype: str, pp: int = 1
) -> Deployment:
    """--model, --hardware, --tp, --weight-dtype and --kv-dtype as a Deployment; a bad one is an InputError."""
    if weight_dtype is not None and weight_dtype not in get_args(WeightDtype):
        raise InputError("--weight-dtype", "", f"unknown weight dtype {weight_dtype!r}")
    if kv_dtype not in get_args(KvDtype):
        raise InputError("--kv-dtype", "", f"unknown KV dtype {kv_dtype!r}")
    spec = load_model(model, "--model")
    weights = weight_dtype or spec.native_dtype
    try:
        hardware = load_hardware(gpu, "--hardware")
        return Deployment(spec, hardware, tp, weights, kv_dtype, pp=pp)  # type: ignore[arg-type]
    except ValueError as exc:
        raise InputError("--pp" if "pipeline" in str(exc) else "--tp", "", str(exc)) from None


def request_limit(value: int | None) -> None:
    """--max-requests, for this process and the plan's workers (TTFTSIM_MAX_REQUESTS; ttftsim/inputs/limits.py)."""
    from ttftsim.inputs.limits import set_request_limit

    if value is not None and value < 1:
        raise InputError("--max-requests", "", f"expects a positive number of requests, got {value}")
    set_request_limit(value)
