"""The stream package's settings section."""

from __future__ import annotations

from dataclasses import dataclass, field

from stream.ice import IceSettings


@dataclass(frozen=True)
class StreamSettings:
    ice: IceSettings = field(default_factory=IceSettings)
    # A session that sends no frame for this long (or never starts) is closed.
    idle_timeout_s: float = 10.0
    max_sessions: int = 32
    stats_interval_s: float = 1.0
    # fmtp hints in the answer: without them Chrome sends what aiortc's REMB
    # estimate allows, which collapsed 720p to 960x540 (streaming.md).
    bitrate_hints_kbps: tuple[int, int, int] = (600, 1500, 3000)  # min, start, max

    def __post_init__(self) -> None:
        if self.idle_timeout_s <= 0:
            raise ValueError("idle_timeout_s must be > 0")
        if self.max_sessions < 1:
            raise ValueError("max_sessions must be >= 1")
