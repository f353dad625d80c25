"""What a batch of n frames costs the chain: a straight line, seconds = per_batch + per_frame * n,
fitted to running means of measured batches at each size.

The runner feeds it every batch it runs (and pipeline/cost_calibration.py a first reading), so the line follows the
device as it is now: a scene with more faces, or another tenant on the GPU, shows up within a few
batches. The fixed-cost chain is exactly such a line; the real chains are close to one over the
sizes a node runs (bench/results/2026-12-07-cost.md: the mesh chain's batch of 4 costs 2.5x its
batch of 1 on the CPU).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

# Each size's running mean follows its new batches with this weight: about the last ten count.
WEIGHT = 0.2
# A size not run for this long no longer says what it costs now.
STALE_S = 5.0


@dataclass(frozen=True)
class CostLine:
    per_batch_s: float
    per_frame_s: float

    def batch_s(self, frames: int) -> float:
        return self.per_batch_s + self.per_frame_s * frames

    def scaled(self, factor: float) -> CostLine:
        return CostLine(self.per_batch_s * factor, self.per_frame_s * factor)

    def describe(self) -> dict[str, float]:
        return {"per_batch_ms": round(self.per_batch_s * 1000, 3), "per_frame_ms": round(self.per_frame_s * 1000, 3)}


class ChainCost:
    """Thread-safe: the runner's compute thread adds, the event loop reads.

    The line is fitted to the sizes run in the last STALE_S. Where only one size runs (one session,
    or the others shed or gone), the last line fitted to several keeps its shape and is scaled to
    that size's cost now: a device that slowed for one size slowed for all, and a size whose
    sessions left must not keep a spike's cost for good (nobody would be let back in).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._by_size: dict[int, tuple[float, float]] = {}  # batch size -> (running mean s, last measured)
        self._shape: CostLine | None = None  # the last line fitted to two sizes or more

    def add(self, frames: int, seconds: float) -> None:
        if frames < 1 or not seconds >= 0:
            return
        with self._lock:
            now = self._clock()
            mean = self._by_size.get(frames, (seconds, 0.0))[0]
            self._by_size[frames] = (mean + WEIGHT * (seconds - mean), now)
            fresh = self._fresh(now)
            if len(fresh) >= 2:
                self._shape = _fitted(fresh)

    def _fresh(self, now: float) -> dict[int, float]:
        return {n: mean for n, (mean, at) in self._by_size.items() if now - at < STALE_S}

    def by_size(self) -> dict[int, float]:
        with self._lock:
            return {frames: mean for frames, (mean, _) in self._by_size.items()}

    def line(self) -> CostLine | None:
        """None before any batch."""
        with self._lock:
            fresh = self._fresh(self._clock())
            if len(fresh) >= 2:
                return _fitted(fresh)
            if len(fresh) == 1:
                (frames, seconds), shape = next(iter(fresh.items())), self._shape
                if shape is not None and shape.batch_s(frames) > 0:
                    return shape.scaled(seconds / shape.batch_s(frames))
                return _fitted(fresh)
            everything = {n: mean for n, (mean, _) in self._by_size.items()}
            return _fitted(everything) if everything else None


def _fitted(points_by_size: dict[int, float]) -> CostLine:
    """The least-squares line through (size, seconds). One size alone: all of it is taken as
    per-frame cost, the cautious reading (it grows with sessions)."""
    points = sorted(points_by_size.items())
    if len(points) == 1:
        frames, seconds = points[0]
        return CostLine(0.0, seconds / frames)
    count = len(points)
    mean_n = sum(n for n, _ in points) / count
    mean_s = sum(s for _, s in points) / count
    spread = sum((n - mean_n) ** 2 for n, _ in points)
    slope = sum((n - mean_n) * (s - mean_s) for n, s in points) / spread
    if slope <= 0:  # larger batches no dearer: a fixed cost a batch (the dearest measured), frames free
        return CostLine(max(s for _, s in points), 0.0)
    intercept = mean_s - slope * mean_n
    if intercept < 0:  # a negative fixed cost: the best line through zero instead
        return CostLine(0.0, sum(n * s for n, s in points) / sum(n * n for n, _ in points))
    return CostLine(intercept, slope)
