"""Simulating with the cyclic garbage collector off leaves it as it found it, nested or threaded."""

from __future__ import annotations

import gc
import threading

from ttftsim.simulate import collector_off


def test_the_collector_stays_off_until_the_last_run_ends_and_is_then_restored() -> None:
    assert gc.isenabled()
    with collector_off:
        assert not gc.isenabled()
        with collector_off:  # a second run inside (another thread, in the dashboard)
            pass
        assert not gc.isenabled()  # the outer run still has it off
    assert gc.isenabled()


def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    try:
        with collector_off:
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_runs_in_threads_restore_the_collector() -> None:
    inside, release = threading.Barrier(3), threading.Event()

    def run() -> None:
        with collector_off:
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()
    assert not gc.isenabled()
    release.set()
    for thread in threads:
        thread.join()
    assert gc.isenabled()
