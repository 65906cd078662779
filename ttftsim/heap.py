"""The C heap under a long run: glibc's malloc raises its mmap threshold each time a mapped block is freed (up to
32 MB), after which the recorder's column chunks (512 KB each) and the frames' temporaries come from the heap,
and once joined and freed they stay in the process as holes the system never gets back. With the threshold
fixed, blocks of 128 KB and more are mapped and unmapped one by one. A fleet's day (benchmarks/cluster_day.py):
joining the first four hours' iteration rows kept 124 MiB without it, none with it (docs/performance.md)."""

from __future__ import annotations

import ctypes
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
THRESHOLD_BYTES = 128 * 1024  # glibc's default, kept fixed


def map_large_blocks() -> bool:
    """Fix glibc's mmap threshold (Linux with glibc; elsewhere nothing happens). True when set."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # another C library (musl)
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES))
