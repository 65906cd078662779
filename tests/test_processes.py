"""Local worker pools (ttftsim/processes.py): no more processes than CPUs or tasks, each ending with its parent."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

import pytest

from tests.test_cli import _assert_one_line_error, run
from ttftsim.processes import local_pool, usable_workers

PR_GET_PDEATHSIG = 2


def _death_signal() -> int:
    value = ctypes.c_int(0)
    ctypes.CDLL("libc.so.6").prctl(PR_GET_PDEATHSIG, ctypes.byref(value))
    return value.value


def test_no_more_workers_than_cpus_or_tasks() -> None:
    cpus = len(os.sched_getaffinity(0))
    assert usable_workers(100_000) == cpus
    assert usable_workers(100_000, tasks=1) == 1
    assert usable_workers(1, tasks=50) == 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_ends_with_its_parent() -> None:
    with local_pool(1) as pool:
        assert pool.submit(_death_signal).result() == signal.SIGTERM


def test_an_absurd_worker_count_is_one_line() -> None:
    _assert_one_line_error(run("plan", "examples/plans/quickstart.yaml", "--workers", "100000"), "--workers")
