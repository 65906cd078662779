"""Local worker processes for plan and accuracy: as many as asked, but no more than the machine's CPUs or the
tasks (a simulation is CPU-bound: more processes than CPUs only add memory, about 80 MB each, and with the fork
start method a process pool starts every worker at once: `--workers 100000` once took a 24 GB machine's memory),
each ending with its parent (Linux's PR_SET_PDEATHSIG: a parent killed outright leaves no orphans)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor

PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)


def usable_workers(asked: int, tasks: int | None = None) -> int:
    """The processes worth starting: at most the CPUs this process may run on, and the tasks (if known)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(asked, cpus, tasks if tasks is not None else asked))


def _end_with_parent() -> None:
    """A worker ends on SIGTERM (its parent's death, PR_SET_PDEATHSIG, or a kill), whatever handler the parent
    installed before forking it (the CLI turns SIGTERM into a KeyboardInterrupt, which a busy worker would report as
    its task's exception and live on)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):  # another C library (musl): the workers still end when the pool closes
            ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def local_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool of `workers` processes (usable_workers decides how many) that end with this one."""
    return ProcessPoolExecutor(max_workers=workers, initializer=_end_with_parent)
