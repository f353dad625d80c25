"""Median wall-clock time of a callable, for the stage benchmarks (synchronised on CUDA)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def median_ms(run: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median milliseconds of `run()` over `repeats` calls, after a few warm-up calls."""

    def synced() -> None:
        run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(max(3, repeats // 10)):
        synced()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        synced()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000
