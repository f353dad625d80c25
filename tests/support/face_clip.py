"""A webcam-like clip of a real face for `facefuse cam`'s tests: a photo framed as a webcam frames
a face, at 640x480, as a short H.264 file the cam loops."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from client.still_picture import top_at_aspect
from support.photos import face_rgb


def face_picture(name: str = "obama.jpg") -> np.ndarray:
    """The photo framed at 640x480 (RGB): what each frame of face_clip() shows."""
    framed = av.VideoFrame.from_ndarray(top_at_aspect(face_rgb(name), 640, 480), format="rgb24")
    return framed.reformat(640, 480).to_ndarray()


def face_clip(path: Path, name: str = "obama.jpg", seconds: float = 2.0, fps: int = 15) -> Path:
    picture = av.VideoFrame.from_ndarray(face_picture(name), format="rgb24")
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 640, 480, "yuv420p"
        for index in range(round(seconds * fps)):
            frame = picture.reformat(format="yuv420p")
            frame.pts = index
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path
