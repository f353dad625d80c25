"""The memory the chain's device holds: torch's CUDA allocator, or on the CPU the process's resident
memory (the chain's tensors live in the process's heap there)."""

from __future__ import annotations

import os
import resource
from typing import NamedTuple

import torch


class DeviceMemory(NamedTuple):
    in_use_bytes: int
    peak_bytes: int


def device_memory(device: str) -> DeviceMemory:
    """On CUDA, what torch's tensors hold now and at most since the start (not what its cache keeps
    reserved); on the CPU, the process's resident set now and at its peak."""
    if device.startswith("cuda"):
        return DeviceMemory(torch.cuda.memory_allocated(device), torch.cuda.max_memory_allocated(device))
    return DeviceMemory(_resident_bytes(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)


def _resident_bytes() -> int:
    """Linux's /proc/self/statm: the resident pages are its second field."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # not Linux: the peak is the best figure there is
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def release_cached_device_memory() -> None:
    """Gives torch's cached CUDA blocks back, so memory freed by a failed batch is there for the
    next allocation (a no-op without CUDA)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
