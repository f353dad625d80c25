"""A video track made from a still image, paced in real time: a stand-in camera.

Used by the Python client (scripts, tests, benchmarks) to send a real photo as
live video, the photo whole with its aspect kept. Each frame can carry a stamp
(see frame_stamp) with its index.
"""

from __future__ import annotations

import asyncio
import fractions
import time

import av
import numpy as np
from aiortc import MediaStreamTrack

from client.frame_stamp import stamp_value, write_stamp
from client.still_picture import fitted_i420

VIDEO_CLOCK = 90_000


class ImageTrack(MediaStreamTrack):
    kind = "video"

    def __init__(
        self, rgb: np.ndarray, *, width: int = 640, height: int = 480, fps: float = 30.0, tag: int | None = None
    ) -> None:
        super().__init__()
        self.fps = fps
        self.tag = tag
        self.sent_at: dict[int, float] = {}  # frame index -> time.monotonic() when handed to the encoder
        self._image = fitted_i420(rgb, width, height)
        self._index = 0
        self._start: float | None = None

    async def recv(self) -> av.VideoFrame:
        if self._start is None:
            self._start = time.monotonic()
        due = self._start + self._index / self.fps
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        image = self._image
        if self.tag is not None:
            image = image.copy()
            write_stamp(image[: image.shape[0] * 2 // 3], stamp_value(self.tag, self._index))
        frame = av.VideoFrame.from_ndarray(image, format="yuv420p")
        frame.pts = round(self._index * VIDEO_CLOCK / self.fps)
        frame.time_base = fractions.Fraction(1, VIDEO_CLOCK)
        if self.tag is not None:
            self.sent_at[self._index & 0xFFFF] = time.monotonic()
            if len(self.sent_at) > 4096:  # bounded: forget the oldest
                del self.sent_at[next(iter(self.sent_at))]
        self._index += 1
        return frame
