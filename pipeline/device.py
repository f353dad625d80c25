"""Choosing the torch device the chain runs on."""

from __future__ import annotations

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
