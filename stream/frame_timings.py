"""Where a session's per-frame times go besides its own stats: the node's histograms
(stream/node_metrics.py). One call per frame, where the frame is timed already."""

from __future__ import annotations

from typing import Protocol


class FrameTimings(Protocol):
    def latency(self, seconds: float) -> None:
        """A frame sent: from its decode to an encoder taking it (once per frame, whoever takes it)."""

    def encode(self, seconds: float) -> None:
        """An encoder's time on one frame: from taking it until it asks for the next (encoding and
        sending); each encoder's, the publisher's return video and every viewer's."""
