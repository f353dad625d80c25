"""Numbers over the last few seconds: rates and percentiles for live stats."""

from __future__ import annotations

import time
from collections import deque


class RollingWindow:
    """Timestamped samples kept for `seconds` (and at most `max_samples`, so memory is bounded)."""

    def __init__(self, seconds: float = 5.0, max_samples: int = 2048) -> None:
        self.seconds = seconds
        self._samples: deque[tuple[float, float]] = deque(maxlen=max_samples)

    def add(self, value: float = 1.0, now: float | None = None) -> None:
        self._samples.append((time.monotonic() if now is None else now, value))

    def _recent(self, now: float | None) -> list[float]:
        now = time.monotonic() if now is None else now
        while self._samples and self._samples[0][0] < now - self.seconds:
            self._samples.popleft()
        return [value for _, value in self._samples]

    def rate(self, now: float | None = None) -> float:
        """Events per second over the window."""
        return len(self._recent(now)) / self.seconds

    def percentile(self, q: float, now: float | None = None) -> float | None:
        values = sorted(self._recent(now))
        if not values:
            return None
        index = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
        return values[index]

    def mean(self, now: float | None = None) -> float | None:
        values = self._recent(now)
        return sum(values) / len(values) if values else None
