"""What one session's video costs the node's CPU besides the chain: the VP8 decode of each frame
that arrives and the encode of each that leaves, as CPU-seconds per pixel of a frame.

Measured by the node at start with the codec sessions use (libvpx, realtime, the changing picture
of a camera); until then, and where the measurement fails, the figure measured on this project's
2-core machines stands (bench/results/2026-12-07-cost.md: 5.5 CPU-ms a 640x480 frame, 15.5 a
1280x720 one: 17-18 ns a pixel).
"""

from __future__ import annotations

import fractions
import logging
import time

import av
import numpy as np

logger = logging.getLogger(__name__)

PRIOR_S_PER_PIXEL = 18e-9
MEASURE_SIZE = (640, 480)
MEASURE_FRAMES = 30


class CodecCost:
    def __init__(self) -> None:
        self.s_per_pixel = PRIOR_S_PER_PIXEL
        self.measured = False

    def session_cores(self, width: int, height: int, fps: float) -> float:
        """Cores one session of this frame size takes at this rate: its decode and its encode."""
        return self.s_per_pixel * width * height * fps

    def measure(self) -> None:
        """Blocking (about a quarter of a second of CPU): run it off the event loop."""
        try:
            # its picture is easier than a camera's: never planned below the camera figure
            self.s_per_pixel = max(PRIOR_S_PER_PIXEL, measured_s_per_pixel())
            self.measured = True
        except Exception as exc:  # an FFmpeg build without libvpx: the prior stands
            logger.warning("could not measure the codec's cost, using %.1f ns a pixel: %s", self.s_per_pixel * 1e9, exc)

    def describe(self) -> dict[str, object]:
        return {"ns_per_pixel": round(self.s_per_pixel * 1e9, 2), "measured": self.measured}


def measured_s_per_pixel(width: int = MEASURE_SIZE[0], height: int = MEASURE_SIZE[1]) -> float:
    """CPU-seconds a pixel to encode then decode frames whose top band changes every frame (a
    still picture costs the encoder almost nothing, a camera's does not)."""
    encoder = av.CodecContext.create("libvpx", "w")
    encoder.width, encoder.height, encoder.pix_fmt = width, height, "yuv420p"
    encoder.time_base = fractions.Fraction(1, 30)
    encoder.bit_rate = 1_500_000
    encoder.thread_count = 1  # one thread, as sessions encode (aiortc_internals/vp8_encoder.py)
    encoder.options = {"deadline": "realtime", "cpu-used": "4", "lag-in-frames": "0"}
    decoder = av.CodecContext.create("libvpx", "r")
    rows, columns = np.mgrid[0 : height * 3 // 2, 0:width]
    scene = ((rows + columns) % 256).astype(np.uint8)  # smooth, as a room is; noise costs 10x more
    started = time.process_time()
    for index in range(MEASURE_FRAMES):
        picture = scene.copy()
        picture[: height // 8] = (index * 7) % 255
        frame = av.VideoFrame.from_ndarray(picture, format="yuv420p")
        frame.pts = index
        for packet in encoder.encode(frame):
            decoder.decode(packet)
    for packet in encoder.encode(None):
        decoder.decode(packet)
    return (time.process_time() - started) / (MEASURE_FRAMES * width * height)
