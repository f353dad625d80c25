"""How alike two video frames are, whatever their sizes and codecs: the Pearson correlation of
their grey values at 64x48. Near 1: the same picture; near -1: its negative, which is what the
invert chain sends back; a passthrough comes back near 1."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

# Below this, a returned frame is the negative of what was sent (the browser tests' wait_remote_inverted
# holds to it too).
INVERTED_R = -0.6


def grey_thumbnail(frame: av.VideoFrame) -> np.ndarray:
    return frame.reformat(64, 48, format="gray").to_ndarray().astype(np.float64).ravel()


def correlation(a: av.VideoFrame, b: av.VideoFrame) -> float:
    return float(np.corrcoef(grey_thumbnail(a), grey_thumbnail(b))[0, 1])


def first_frame(path: Path) -> av.VideoFrame:
    """The first frame of a clip or picture file (a y4m camera clip, a photo)."""
    with av.open(str(path)) as container:
        return next(container.decode(video=0))


def i420_frame(image: np.ndarray) -> av.VideoFrame:
    """A frame of an I420 image as client.still_picture.fitted_i420 makes it (what ImageTrack sends)."""
    return av.VideoFrame.from_ndarray(image, format="yuv420p")
