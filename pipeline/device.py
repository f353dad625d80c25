"""Choosing the torch device the chain runs on."""

from __future__ import annotations

import os
from typing import Literal

import torch

DeviceChoice = Literal["auto", "cpu", "cuda"]


class DeviceUnavailable(RuntimeError):
    pass


def resolve_device(choice: DeviceChoice) -> torch.device:
    """'auto' takes CUDA when present, else the CPU; 'cuda' without CUDA is an error."""
    if choice == "cpu":
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if choice == "cuda":
        raise DeviceUnavailable("--device cuda was asked for, but torch sees no CUDA device")
    return torch.device("cpu")


def set_cpu_threads(threads: int | None) -> int:
    """torch's intra-op threads for CPU work; None: all cores but one (at least one). Returns it."""
    count = threads if threads is not None else max(1, (os.cpu_count() or 2) - 1)
    torch.set_num_threads(count)
    return count
