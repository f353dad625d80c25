"""pipeline/host_memory.py: with freed memory kept, a batch of frames allocated on a thread other
than the main one (the runner's compute thread) comes from the heap and stays there when freed,
instead of being mapped fresh from the kernel every batch. Run in a fresh interpreter each: malloc
settings last for the life of a process, and they must come before any thread allocates."""

import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc settings are glibc's")

ROOT = Path(__file__).resolve().parents[2]
FRAMES_BYTES = 8 * 3 * 720 * 1280 * 4  # eight 1280x720 frames as float RGB: 88 MB

SCRIPT = """
import ctypes, sys, threading
from pipeline.host_memory import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory()
import torch

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
mapped, free_after = [], []

def batches():
    for _ in range(3):
        frames = torch.empty(8, 3, 720, 1280)
        frames.fill_(0.5)
        mapped.append(libc.mallinfo2().hblkhd)  # bytes in blocks mapped on their own
        del frames
        free_after.append(libc.mallinfo2().fordblks)  # free bytes the heaps keep

thread = threading.Thread(target=batches)
thread.start()
thread.join()
print(max(mapped), min(free_after))
"""


def run(mode: str) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    mapped, free_after = (int(value) for value in done.stdout.split())
    return mapped, free_after


def test_a_threads_frame_batch_comes_from_the_heap_and_stays_there_when_kept() -> None:
    mapped, free_after = run("kept")
    assert mapped < FRAMES_BYTES  # not mapped on its own: from the heap
    assert free_after >= FRAMES_BYTES  # freed, and kept for the next batch


def test_without_it_glibc_maps_each_batch_afresh() -> None:
    """What the setting changes (if glibc ever stops doing this, the setting can go)."""
    mapped, free_after = run("glibc")
    assert mapped >= FRAMES_BYTES
    assert free_after < FRAMES_BYTES
