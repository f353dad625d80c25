"""Numbers over the last few seconds: rates and percentiles for live stats."""

from __future__ import annotations

import time
from collections import deque


class RollingWindow:
    """Timestamped samples kept for `seconds` (and at most `max_samples`, so memory is bounded)."""

    def __init__(self, seconds: float = 5.0, max_samples: int = 2048) -> None:
        self.seconds = seconds
        self._samples: deque[tuple[float, float]] = deque(maxlen=max_samples)
        self._first_at: float | None = None  # the first sample's time: a young window is not yet full

    def add(self, value: float = 1.0, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if self._first_at is None:
            self._first_at = now
        self._samples.append((now, value))

    def _recent(self, now: float | None) -> list[float]:
        now = time.monotonic() if now is None else now
        while self._samples and self._samples[0][0] < now - self.seconds:
            self._samples.popleft()
        return [value for _, value in self._samples]

    def rate(self, now: float | None = None) -> float:
        """Events per second over the window, or over the time since the first event while that is
        shorter (at least a second, so one early event is not read as a burst)."""
        now = time.monotonic() if now is None else now
        span = self.seconds if self._first_at is None else min(self.seconds, max(1.0, now - self._first_at))
        return len(self._recent(now)) / span

    def percentile(self, q: float, now: float | None = None) -> float | None:
        values = sorted(self._recent(now))
        if not values:
            return None
        index = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
        return values[index]

    def mean(self, now: float | None = None) -> float | None:
        values = self._recent(now)
        return sum(values) / len(values) if values else None
