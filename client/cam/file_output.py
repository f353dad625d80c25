"""The swapped frames written to a video file (PyAV): H.264 in .mp4, .mkv and .mov, VP8 in .webm.

Frames are timed by the wall clock when they arrive, so the file plays at the speed the video
came in, dropped frames included."""

from __future__ import annotations

import fractions
import time
from pathlib import Path

import av

from client.cam.errors import CamError

CODEC_BY_SUFFIX = {".webm": "libvpx"}
DEFAULT_CODEC = "libx264"
MILLISECONDS = fractions.Fraction(1, 1000)


class FileOutput:
    def __init__(self, path: Path, width: int, height: int, fps: float) -> None:
        self.path = path
        self.width, self.height = width - width % 2, height - height % 2  # 4:2:0 needs even sizes
        try:
            self._container = av.open(str(path), "w")
        except (av.FFmpegError, OSError, ValueError) as exc:
            raise CamError(f"cannot write {path}: {exc}") from None
        codec = CODEC_BY_SUFFIX.get(path.suffix.lower(), DEFAULT_CODEC)
        # No frames held back for reordering: the file is written as the video arrives, in order.
        options = {"tune": "zerolatency", "preset": "veryfast"} if codec == DEFAULT_CODEC else {}
        self._stream = self._container.add_stream(codec, rate=round(fps), options=options)
        self._stream.width, self._stream.height, self._stream.pix_fmt = self.width, self.height, "yuv420p"
        self._stream.codec_context.time_base = MILLISECONDS  # the frames are timed in milliseconds
        self._stream.time_base = MILLISECONDS
        self._start: float | None = None
        self._last_pts = -1
        self.frames_written = 0

    def write(self, frame: av.VideoFrame) -> None:
        now = time.monotonic()
        if self._start is None:
            self._start = now
        pts = max(round((now - self._start) * 1000), self._last_pts + 1)  # strictly increasing
        out = frame.reformat(self.width, self.height, format="yuv420p")
        out.pts, out.time_base, self._last_pts = pts, MILLISECONDS, pts
        self._container.mux(self._stream.encode(out))
        self.frames_written += 1

    def close(self) -> None:
        """Flushes the encoder and closes the file (a file without its trailer does not play)."""
        try:
            self._container.mux(self._stream.encode(None))
        finally:
            self._container.close()
