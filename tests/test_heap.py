"""glibc's mmap threshold fixed by the CLI's entry point (ttftsim/heap.py), so memory a long run frees goes back."""

from __future__ import annotations

import platform
import sys

from ttftsim.heap import map_large_blocks


def test_the_threshold_is_set_where_glibc_is_the_c_library() -> None:
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert map_large_blocks() is glibc
