"""Between decoded video frames and the I420 arrays chains work on."""

from __future__ import annotations

import av
import numpy as np


def frame_to_image(frame: av.VideoFrame) -> np.ndarray:
    """An I420 array (h * 3 // 2, w); converts from other pixel formats when needed."""
    return frame.to_ndarray(format="yuv420p")


def image_to_frame(image: np.ndarray, like: av.VideoFrame) -> av.VideoFrame:
    """A new frame holding `image`, with the timing (pts, time_base) of `like`."""
    if image.dtype != np.uint8 or image.ndim != 2 or image.shape[0] % 3:
        raise ValueError(f"a chain returned a {image.dtype} array of shape {image.shape}, not I420")
    frame = av.VideoFrame.from_ndarray(image, format="yuv420p")
    frame.pts = like.pts
    frame.time_base = like.time_base
    return frame
