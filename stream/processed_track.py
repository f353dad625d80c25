"""The session's outgoing track: hands the encoder the newest processed frame.

One slot, latest wins: if the encoder falls behind, an older processed frame is
replaced rather than queued. `recv()` raises only to end the track.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

from pipeline.rolling import RollingWindow
from pipeline.runner import FrameResult


class ProcessedTrack(MediaStreamTrack):
    kind = "video"

    def __init__(
        self,
        on_sent: Callable[[FrameResult, float], None],
        on_replaced: Callable[[], None],
        on_encoded: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__()
        self._on_sent = on_sent
        self._on_replaced = on_replaced
        self._on_encoded = on_encoded  # each frame's encoding and sending, in seconds (the node's metrics)
        self._slot: FrameResult | None = None
        self._ready = asyncio.Event()
        # ms from handing a frame to the sender until it asks for the next: encoding and sending it
        self.encode_ms = RollingWindow(10.0)
        self._handed_at: float | None = None

    def put(self, result: FrameResult) -> None:
        """Called on the event loop with each result from the runner."""
        if self.readyState != "live":
            return
        if self._slot is not None:
            self._on_replaced()
        self._slot = result
        self._ready.set()

    async def recv(self) -> av.VideoFrame:
        if self._handed_at is not None:  # the sender asks again once it has encoded and sent the last frame
            encode_s = time.monotonic() - self._handed_at
            self.encode_ms.add(encode_s * 1000)
            if self._on_encoded is not None:
                self._on_encoded(encode_s)
            self._handed_at = None
        while self._slot is None:
            if self.readyState != "live":
                raise MediaStreamError
            self._ready.clear()
            await self._ready.wait()
        result, self._slot = self._slot, None
        self._handed_at = time.monotonic()
        self._on_sent(result, self._handed_at)
        return result.frame

    def stop(self) -> None:
        super().stop()
        self._slot = None
        self._ready.set()  # wake a waiting recv() so it ends the track
