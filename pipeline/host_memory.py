"""Freed host memory kept for reuse (glibc malloc), so whole-frame tensors stop page-faulting.

On the CPU every batch allocates and frees tens of MB of frame tensors (eight 1280x720 frames as
float RGB are 88 MB). glibc gives blocks that large back to the kernel when they are freed (they
are mmap'd above a threshold, and the heap's top is trimmed), so the next batch page-faults all of
it in again: I420 -> RGB of eight 1280x720 frames took 129 ms on a 2-core machine, 37 ms with the
memory kept. Threads other than the main one allocate from arenas whose heaps glibc caps at
64 MB, so on the runner's compute thread large batches were mmap'd whatever the thresholds: one
arena for every thread (the chain's threads take turns under the GIL anyway). PyTorch's CPU
performance tuning guide recommends jemalloc or TCMalloc for the same reason; this needs nothing
beside glibc. The cost: the process keeps its peak heap instead of shrinking after it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger(__name__)

# mallopt parameters, from glibc's malloc.h
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8

_SETTINGS = (
    (_M_ARENA_MAX, 1),  # one arena: the compute thread's big blocks come from the main heap
    (_M_MMAP_THRESHOLD, 1 << 30),  # blocks under 1 GiB come from the heap, not fresh mmaps
    (_M_TRIM_THRESHOLD, (1 << 31) - 1),  # never hand the heap's free top back to the kernel
    (_M_TOP_PAD, 64 << 20),  # grow the heap 64 MB at a time
)


def keep_freed_memory() -> bool:
    """Sets glibc malloc to keep freed memory for reuse. Call it first thing in the process, before
    any thread starts (a thread keeps the arena it first allocated from). Returns whether it took
    effect: False where the C library is not glibc (nothing changes there)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
        return False
    applied = all(libc.mallopt(parameter, value) == 1 for parameter, value in _SETTINGS)
    if not applied:
        logger.warning("glibc refused a malloc setting: freed frame memory may be returned to the kernel")
    return applied
