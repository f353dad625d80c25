"""A still picture as one video frame: scaled to fit whole with its aspect kept, centred on black;
and a portrait framed as a webcam frames a face (its top part, at the frame's aspect).

A stand-in camera (ImageTrack) and the tests send portraits as 640x480 video; stretched to the
frame instead, a portrait's face came out 2.5 times as wide for its height (obama2.jpg, 626x1200),
and FaceMesh grew unsure of it (presence down to 0.21) where the real face scores 1.00.
"""

from __future__ import annotations

import av
import numpy as np


def fitted_i420(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    """`rgb` (H, W, 3 uint8) fitted into a width x height yuv420p frame, as av's (H * 3 / 2, W) array."""
    if width % 2 or height % 2 or width <= 0 or height <= 0:
        raise ValueError(f"a yuv420p frame needs a positive even size, not {width}x{height}")
    picture_h, picture_w = _picture_size(rgb)
    scale = min(width / picture_w, height / picture_h)
    # even sizes and offsets: the picture's edge falls on whole chroma samples
    fit_w = min(width, max(2, 2 * round(picture_w * scale / 2)))
    fit_h = min(height, max(2, 2 * round(picture_h * scale / 2)))
    scaled = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(fit_w, fit_h)
    canvas = np.zeros((height, width, 3), np.uint8)
    top, left = (height - fit_h) // 4 * 2, (width - fit_w) // 4 * 2
    canvas[top : top + fit_h, left : left + fit_w] = scaled.to_ndarray(format="rgb24")
    return av.VideoFrame.from_ndarray(canvas, format="rgb24").reformat(format="yuv420p").to_ndarray()


def top_at_aspect(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    """The top of a portrait cut to width:height, as a webcam frames a head and shoulders (the
    benchmarks send it: the face then fills the frame about as a caller's does)."""
    picture_h, picture_w = _picture_size(rgb)
    if picture_w * height <= picture_h * width:  # taller than the frame: keep the top
        return np.ascontiguousarray(rgb[: max(1, round(picture_w * height / width))])
    keep_w = max(1, round(picture_h * width / height))  # wider: keep the middle
    left = (picture_w - keep_w) // 2
    return np.ascontiguousarray(rgb[:, left : left + keep_w])


def _picture_size(rgb: np.ndarray) -> tuple[int, int]:
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.shape[0] == 0 or rgb.shape[1] == 0:
        raise ValueError(f"a picture is an (H, W, 3) array with H, W > 0, not {rgb.shape}")
    return rgb.shape[0], rgb.shape[1]
