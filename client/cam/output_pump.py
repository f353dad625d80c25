"""Carries the played frames to the outputs (virtual camera, file): one task receives, one writes.

Writing (RGB conversion, encoding a file) runs in a worker thread, off the event loop. A slot
holds only the newest frame received: when the outputs fall behind, the frames they missed are
skipped, never queued, so the camera shows the present.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import Protocol

import av
from aiortc import MediaStreamTrack
from aiortc.mediastreams import MediaStreamError

logger = logging.getLogger(__name__)

RATE_WINDOW_S = 3.0


class Output(Protocol):
    def write(self, frame: av.VideoFrame) -> None: ...

    def close(self) -> None: ...


class OutputPump:
    def __init__(self, track: MediaStreamTrack, outputs: list[Output]) -> None:
        self.track = track
        self.outputs = outputs
        self.frames_received = 0
        self.frames_written = 0
        self.ended = asyncio.Event()  # the track ended (the server closed the viewer), or an output failed
        self.failure: str | None = None  # why an output failed
        self._writing: asyncio.Future[None] | None = None  # the write in the worker thread, if any
        self._written_at: deque[float] = deque(maxlen=256)
        self._newest: av.VideoFrame | None = None
        self._arrived = asyncio.Event()
        self._tasks = [asyncio.ensure_future(self._receive()), asyncio.ensure_future(self._write())]

    def fps(self) -> float:
        """Frames written a second, over the last few seconds."""
        now = time.monotonic()
        recent = [at for at in self._written_at if now - at <= RATE_WINDOW_S]
        return len(recent) / RATE_WINDOW_S

    async def _receive(self) -> None:
        try:
            while True:
                self._newest = await self.track.recv()
                self.frames_received += 1
                self._arrived.set()
        except MediaStreamError:
            self.ended.set()

    async def _write(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            frame, self._newest = self._newest, None
            if frame is None:
                continue
            self._writing = asyncio.ensure_future(asyncio.to_thread(self._write_all, frame))
            try:
                await asyncio.shield(self._writing)  # cancelled or not, the thread finishes its frame
            except Exception as exc:
                self.failure = f"writing a frame failed: {exc}"
                self.ended.set()
                return
            self.frames_written += 1
            self._written_at.append(time.monotonic())

    def _write_all(self, frame: av.VideoFrame) -> None:
        for output in self.outputs:
            output.write(frame)

    async def close(self) -> None:
        """Stops both tasks, then closes the outputs (a file gets its trailer)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._writing is not None:  # an output is closed only once no thread writes to it
            with contextlib.suppress(Exception):
                await self._writing
        for output in self.outputs:
            try:
                await asyncio.to_thread(output.close)
            except Exception:
                logger.exception("closing %s failed", type(output).__name__)
