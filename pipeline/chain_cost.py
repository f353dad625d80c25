"""What a batch of n frames costs the chain: a straight line, seconds = per_batch + per_frame * n,
fitted to running means of measured batches at each size.

The runner feeds it every batch it runs (and the warm-up's timed batches), so the line follows the
device as it is now: a scene with more faces, or another tenant on the GPU, shows up within a few
batches. The fixed-cost chain is exactly such a line; the real chains are close to one over the
sizes a node runs (bench/results/2026-12-07-cost.md: the mesh chain's batch of 4 costs 2.5x its
batch of 1 on the CPU).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

# Each size's running mean follows its new batches with this weight: about the last ten count.
WEIGHT = 0.2
# The other sizes' means move by the same factor at this share of the weight: a device that slowed
# for one size slowed for all, and a size that no longer runs (the sessions it held are shed or
# gone) would otherwise keep its old cost for good. Half, so each size's own batches still set it.
OTHERS_SHARE = 0.5


@dataclass(frozen=True)
class CostLine:
    per_batch_s: float
    per_frame_s: float

    def batch_s(self, frames: int) -> float:
        return self.per_batch_s + self.per_frame_s * frames

    def describe(self) -> dict[str, float]:
        return {"per_batch_ms": round(self.per_batch_s * 1000, 3), "per_frame_ms": round(self.per_frame_s * 1000, 3)}


class ChainCost:
    """Thread-safe: the runner's compute thread adds, the event loop reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_size: dict[int, float] = {}  # batch size -> running mean of its seconds

    def add(self, frames: int, seconds: float) -> None:
        if frames < 1 or not seconds >= 0:
            return
        with self._lock:
            mean = self._by_size.get(frames)
            if mean is None or mean <= 0:
                self._by_size[frames] = seconds
                return
            change = seconds / mean - 1
            for size in self._by_size:
                self._by_size[size] *= 1 + WEIGHT * change * (1 if size == frames else OTHERS_SHARE)

    def by_size(self) -> dict[int, float]:
        with self._lock:
            return dict(self._by_size)

    def line(self) -> CostLine | None:
        """The line through the measured sizes (least squares); None before any batch. One size
        alone: all of it is taken as per-frame cost, the cautious reading (it grows with sessions)."""
        points = sorted(self.by_size().items())
        if not points:
            return None
        if len(points) == 1:
            frames, seconds = points[0]
            return CostLine(0.0, seconds / frames)
        count = len(points)
        mean_n = sum(n for n, _ in points) / count
        mean_s = sum(s for _, s in points) / count
        spread = sum((n - mean_n) ** 2 for n, _ in points)
        slope = sum((n - mean_n) * (s - mean_s) for n, s in points) / spread
        if slope <= 0:  # noise: larger batches measured no dearer; charge the dearest per frame
            return CostLine(0.0, max(s / n for n, s in points))
        intercept = mean_s - slope * mean_n
        if intercept < 0:  # a negative fixed cost: the best line through zero instead
            return CostLine(0.0, sum(n * s for n, s in points) / sum(n * n for n, _ in points))
        return CostLine(intercept, slope)
