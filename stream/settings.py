"""The stream package's settings section (flag help in field metadata: see pipeline/settings.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stream.ice import IceSettings


@dataclass(frozen=True)
class StreamSettings:
    ice: IceSettings = field(default_factory=IceSettings)
    # A session that sends no frame for this long (or never starts) is closed, and so is a viewer
    # whose connection is not up this long after its answer.
    idle_timeout_s: float = field(default=10.0, metadata={"help": "seconds without video before a session is closed"})
    max_sessions: int | None = field(
        default=None,
        metadata={
            "help": "concurrent sessions at most, waiting ones included; auto: as many as the capacity model says fit",
            "default_text": "auto",
        },
    )
    # The capacity model (stream/capacity.py, docs/running.md "When the node is full").
    target_fps: float = field(default=30.0, metadata={"help": "the rate each processed session is planned for"})
    floor_fps: float = field(
        default=24.0,
        metadata={"help": "below this rate a processed session counts as degraded: the node admits no more, and sheds"},
    )
    max_queue: int = field(
        default=16, metadata={"help": "sessions waiting for capacity at most; one more is answered 503"}
    )
    max_viewers_per_stream: int = field(
        default=50, metadata={"help": "WHEP viewers of one stream at most (each encodes its own video)"}
    )
    max_viewers: int = field(
        default=100,
        metadata={"help": "WHEP viewers on this node at most, every stream's together (each encodes its own video)"},
    )
    max_viewers_per_token: int = field(
        default=10, metadata={"help": "WHEP viewers one view token holds at once (its holder may share the URL)"}
    )
    drain_timeout_s: float = field(
        default=300.0,
        metadata={"help": "seconds live sessions may go on once the node drains (SIGTERM), before they are closed"},
    )
    stats_interval_s: float = 1.0
    # fmtp hints in the answer: without them Chrome sends what aiortc's REMB
    # estimate allows, which collapsed 720p to 960x540 (docs/architecture.md).
    bitrate_hints_kbps: tuple[int, int, int] = (600, 1500, 3000)  # min, start, max
    # A peer's video that declares frames of more pixels is refused before decoding and the
    # session closed (decode_size_limit.py: a 242 KB VP8 keyframe of 12000x12000 took the decoder
    # 683 MB). 4096x2304 admits 4K; the chain scales frames down further (pipeline max_frame_pixels).
    max_decoded_pixels: int = field(
        default=4096 * 2304,
        metadata={
            "help": "a peer whose video declares larger frames (pixels, or WIDTHxHEIGHT) is refused before decoding"
        },
    )

    def __post_init__(self) -> None:
        if not self.idle_timeout_s > 0:  # NaN fails it too; inf: idle sessions are never closed
            raise ValueError("idle_timeout_s must be a number > 0")
        if self.max_sessions is not None and self.max_sessions < 1:
            raise ValueError("max_sessions must be >= 1 (or None: auto)")
        if not 0 < self.floor_fps <= self.target_fps <= 240:  # NaN fails it too
            raise ValueError("target_fps and floor_fps must be numbers with 0 < floor_fps <= target_fps <= 240")
        if self.max_queue < 0:
            raise ValueError("max_queue must be >= 0")
        if not self.drain_timeout_s >= 0:  # NaN fails it too
            raise ValueError("drain_timeout_s must be a number >= 0")
        if self.max_viewers_per_stream < 0:
            raise ValueError("max_viewers_per_stream must be >= 0")
        if self.max_viewers < 0:
            raise ValueError("max_viewers must be >= 0")
        if self.max_viewers_per_token < 0:
            raise ValueError("max_viewers_per_token must be >= 0")
        if self.max_decoded_pixels < 64 * 64:
            raise ValueError("max_decoded_pixels must be at least 4096 (64x64)")
