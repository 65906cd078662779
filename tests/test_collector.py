"""Simulating with fewer garbage-collector passes leaves the collector as it found it, nested or threaded."""

from __future__ import annotations

import gc
import threading

from ttftsim.simulate import YOUNG_COLLECTION_OBJECTS, fewer_collections


def test_settings_hold_until_the_last_run_ends_and_are_then_restored() -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with fewer_collections:
        assert gc.get_threshold()[0] == YOUNG_COLLECTION_OBJECTS and gc.get_freeze_count() > frozen
        with fewer_collections:  # a second run inside (another thread, in the dashboard)
            pass
        assert gc.get_threshold()[0] == YOUNG_COLLECTION_OBJECTS  # the outer run still has them
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def test_overlapping_runs_in_threads_restore_the_settings() -> None:
    before = gc.get_threshold()
    inside, release = threading.Barrier(3), threading.Event()

    def run() -> None:
        with fewer_collections:
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    inside.wait()
    assert gc.get_threshold()[0] == YOUNG_COLLECTION_OBJECTS
    release.set()
    for thread in threads:
        thread.join()
    assert gc.get_threshold() == before
