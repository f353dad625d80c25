"""The swapped video as one track that outlives its WHEP connections.

The outputs read this track for the whole run; the WHEP connection it plays from may drop and be
replaced by a new one (`play_from`) while the published session goes on, and the outputs simply
get frames again. When the connection's own track ends, `source_ended` is set and this track
waits for the next one; it never ends by itself.
"""

from __future__ import annotations

import asyncio

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError


class ViewerTrack(MediaStreamTrack):
    kind = "video"

    def __init__(self) -> None:
        super().__init__()
        self.source_ended = asyncio.Event()  # the connection's track ended: play again to get frames
        self.frames_from_source = 0  # frames received from the current connection
        self._source: MediaStreamTrack | None = None
        self._has_source = asyncio.Event()
        self._receiving: asyncio.Future[av.VideoFrame] | None = None

    def play_from(self, source: MediaStreamTrack) -> None:
        """Frames from now on come from `source`; a frame still awaited from the previous one is
        given up, so a connection that stalls instead of ending never holds the new one back."""
        self._source = source
        self.frames_from_source = 0
        self.source_ended.clear()
        self._has_source.set()
        if self._receiving is not None:
            self._receiving.cancel()

    async def recv(self) -> av.VideoFrame:
        while True:
            if self.readyState != "live":
                raise MediaStreamError
            await self._has_source.wait()
            source = self._source
            assert source is not None
            self._receiving = receiving = asyncio.ensure_future(source.recv())
            try:
                await asyncio.wait({receiving})  # unlike awaiting it, returns when play_from cancels it
            finally:
                receiving.cancel()  # no-op once done; when this task is cancelled, the inner one goes too
                self._receiving = None
            if receiving.cancelled() or source is not self._source:
                continue  # replaced while waiting
            if isinstance(receiving.exception(), MediaStreamError):
                self._has_source.clear()
                self.source_ended.set()
                continue
            frame = receiving.result()  # any other failure of the connection's track is raised here
            self.frames_from_source += 1
            return frame
