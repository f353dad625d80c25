"""The largest batch the device's free memory holds, from what each batch size took at warm-up.

The warm-up measures, per batch size it ran, the device memory the batch took beyond what was in use
before it (its peak). A size between two measured ones is interpolated linearly; one beyond the
largest measured is extrapolated with the last two's per-frame increment. The runner still splits a
batch that runs out of memory (runner.py); this cap keeps that for surprises (a scene with more
faces, another tenant on the device) rather than for every batch of the requested size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch

MIB = 1 << 20
# Kept free: 10 % of the device's memory, at least 256 MiB. The peaks are torch's allocations; the
# allocator's fragmentation, kernels' workspaces outside it and a busier scene than the warm-up's
# blank frames need room beyond them.
MARGIN_FRACTION = 0.10
MIN_MARGIN_BYTES = 256 * MIB


def safety_margin(total: int) -> int:
    """The bytes kept free on a device of `total` bytes."""
    return max(int(total * MARGIN_FRACTION), MIN_MARGIN_BYTES)


def predicted_peak(peaks: Mapping[int, int], size: int) -> float:
    """The memory a batch of `size` frames takes, from the measured `peaks` (batch size -> bytes):
    linear between measured sizes, and beyond them along the nearest two's per-frame increment. With
    one measured size, or an increment that does not grow (measurement noise), each frame counts as
    the nearest measured batch's bytes per frame (its fixed part counted again per frame: more, not
    less)."""
    if not peaks:
        raise ValueError("no measured batch sizes")
    if size in peaks:
        return float(peaks[size])
    sizes = sorted(peaks)
    below = [s for s in sizes if s < size]
    above = [s for s in sizes if s > size]
    if below and above:  # between two measured sizes
        a, b = below[-1], above[0]
        return peaks[a] + (peaks[b] - peaks[a]) * (size - a) / (b - a)
    # beyond the largest measured size, or below the smallest: along the nearest two
    nearest, other = (sizes[-1], sizes[-2:-1]) if below else (sizes[0], sizes[1:2])
    increment = (peaks[nearest] - peaks[other[0]]) / (nearest - other[0]) if other else 0.0
    if increment <= 0:
        increment = peaks[nearest] / nearest
    return peaks[nearest] + increment * (size - nearest)


def memory_batch_cap(peaks: Mapping[int, int], free: int, total: int, max_batch: int) -> int:
    """The largest batch size up to `max_batch` whose predicted peak, and every smaller size's, fits
    in `free` bytes less the safety margin; at least 1 (a frame that does not fit fails alone in the
    runner). No measured peaks: `max_batch` (nothing to cap by)."""
    if max_batch < 1:
        raise ValueError("max_batch must be >= 1")
    if not peaks:
        return max_batch
    budget = free - safety_margin(total)
    cap = 0
    for size in range(1, max_batch + 1):
        if predicted_peak(peaks, size) > budget:
            break
        cap = size
    return max(cap, 1)


def measure_batch_peaks(
    device: torch.device | str, run_batch: Callable[[int], object], sizes: Iterable[int]
) -> dict[int, int]:
    """Runs `run_batch(size)` for each size, in order; on CUDA returns each size's peak: the most
    torch allocated during the batch less what was allocated before it (the peak statistics are
    reset for each). On another device the batches run and nothing is measured: {} (the CPU's
    memory is the process's heap, no cap there)."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    peaks: dict[int, int] = {}
    for size in sizes:
        if cuda:
            torch.cuda.synchronize(device)
            before = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
        run_batch(size)
        if cuda:
            torch.cuda.synchronize(device)
            peaks[size] = max(torch.cuda.max_memory_allocated(device) - before, 0)
    return peaks


def free_device_memory(device: torch.device | str) -> tuple[int, int]:
    """(free, total) bytes of a CUDA device, as torch.cuda.mem_get_info reports them plus what
    torch's allocator holds cached but unused (the warm-up's batches leave that much reserved, and
    it is there for the next batch)."""
    free, total = torch.cuda.mem_get_info(device)
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return free + max(cached, 0), total
