"""Live numbers for one session: frames in/out/dropped/failed, fps, server latency."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline.rolling import RollingWindow

FPS_WINDOW_S = 3.0


@dataclass
class SessionStats:
    frames_in: int = 0
    frames_out: int = 0
    frames_processed: int = 0  # frames the chain processed
    frames_charged: int = 0  # processed frames the encoder took: what the meter charges
    frames_dropped: int = 0  # replaced before processing, or before the encoder took them
    frames_failed: int = 0  # processing failed: sent on unprocessed
    frames_passed_through: int = 0  # the chain passed it on unchanged on purpose (no face, no source face)
    frames_throttled: int = 0  # shown unprocessed and uncharged: the meter stopped the session
    frames_waiting: int = 0  # shown unprocessed and uncharged: the session waits for the node's capacity
    codec: str | None = None
    width: int | None = None
    height: int | None = None
    last_error: str | None = None
    _fps_in: RollingWindow = field(default_factory=lambda: RollingWindow(FPS_WINDOW_S))
    _fps_out: RollingWindow = field(default_factory=lambda: RollingWindow(FPS_WINDOW_S))
    # decode done -> processed frame handed to the encoder, in ms
    _latency_ms: RollingWindow = field(default_factory=lambda: RollingWindow(10.0))
    # the node's latency histogram (stream/node_metrics.py): sees each frame sent, in seconds
    latency_sink: Callable[[float], None] | None = field(default=None, repr=False)

    def frame_in(self, width: int, height: int, now: float) -> None:
        self.frames_in += 1
        self.width, self.height = width, height
        self._fps_in.add(now=now)

    def frame_out(self, arrived: float, now: float) -> None:
        self.frames_out += 1
        self._fps_out.add(now=now)
        self._latency_ms.add((now - arrived) * 1000, now=now)
        if self.latency_sink is not None:
            self.latency_sink(now - arrived)

    def latency_s(self, now: float | None = None) -> float | None:
        """The median latency of the last seconds' frames; None before any frame went out."""
        median_ms = self._latency_ms.percentile(50, time.monotonic() if now is None else now)
        return None if median_ms is None else median_ms / 1000

    def as_dict(self, now: float | None = None) -> dict[str, object]:
        now = time.monotonic() if now is None else now
        return {
            "frames_in": self.frames_in,
            "frames_out": self.frames_out,
            "frames_processed": self.frames_processed,
            "frames_charged": self.frames_charged,
            "frames_dropped": self.frames_dropped,
            "frames_failed": self.frames_failed,
            "frames_waiting": self.frames_waiting,
            "fps_in": round(self._fps_in.rate(now), 2),
            "fps_out": round(self._fps_out.rate(now), 2),
            "latency_ms": {
                "p50": _round(self._latency_ms.percentile(50, now)),
                "p99": _round(self._latency_ms.percentile(99, now)),
            },
            "codec": self.codec,
            "width": self.width,
            "height": self.height,
            "last_error": self.last_error,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
