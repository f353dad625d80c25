"""Between decoded video frames and the I420 arrays chains work on."""

from __future__ import annotations

import math

import av
import numpy as np


def frame_to_image(frame: av.VideoFrame, max_pixels: int | None = None) -> np.ndarray:
    """An I420 array (h * 3 // 2, w); converts from other pixel formats when needed.

    A frame of more than `max_pixels` pixels is scaled down to fit them, its aspect kept: peers
    choose their frame size (VP8 goes up to 16383x16383), and one 7680x4320 frame costs a CPU
    chain 3.5 s and 1.3 GB, a stall for every session batched with it.

    I420 arrays need an even width and height, but peers may send odd ones (a browser that scales
    a 1366x768 capture by half sends 683x384; VP8 allows any size). Such a frame loses its last
    column or row: one pixel of the edge, instead of every frame of the session failing."""
    if max_pixels is not None and frame.width * frame.height > max_pixels:
        scale = math.sqrt(max_pixels / (frame.width * frame.height))
        width, height = _even_at_least_2(frame.width * scale), _even_at_least_2(frame.height * scale)
        # a sliver (16383x3) keeps 2 pixels across: the long side gives up what that adds
        width, height = (
            min(width, _even_at_least_2(max_pixels / height)),
            min(height, _even_at_least_2(max_pixels / width)),
        )
        return frame.reformat(width=width, height=height, format="yuv420p").to_ndarray()
    width, height = frame.width // 2 * 2, frame.height // 2 * 2
    if (width, height) == (frame.width, frame.height):
        return frame.to_ndarray(format="yuv420p")
    if width == 0 or height == 0:
        raise ValueError(f"a {frame.width}x{frame.height} frame is too small for I420")
    if frame.format.name != "yuv420p":
        frame = frame.reformat(format="yuv420p")
    image = np.empty((height * 3 // 2, width), np.uint8)
    image[:height] = _plane(frame.planes[0], height, width)
    chroma = image[height:].reshape(2, height // 2, width // 2)  # U then V, as I420 lays them out
    chroma[0] = _plane(frame.planes[1], height // 2, width // 2)
    chroma[1] = _plane(frame.planes[2], height // 2, width // 2)
    return image


def _even_at_least_2(side: float) -> int:
    return max(2, int(side) // 2 * 2)


def _plane(plane: av.video.plane.VideoPlane, rows: int, columns: int) -> np.ndarray:
    """The top-left rows x columns of a plane, read past its line padding."""
    return np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)[:rows, :columns]


def image_to_frame(image: np.ndarray, like: av.VideoFrame) -> av.VideoFrame:
    """A new frame holding `image`, with the timing (pts, time_base) of `like`."""
    if image.dtype != np.uint8 or image.ndim != 2 or image.shape[0] % 3:
        raise ValueError(f"a chain returned a {image.dtype} array of shape {image.shape}, not I420")
    frame = av.VideoFrame.from_ndarray(image, format="yuv420p")
    frame.pts = like.pts
    frame.time_base = like.time_base
    return frame
