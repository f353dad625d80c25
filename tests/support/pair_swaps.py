"""Swaps of any source photo onto any target photo through today's `mesh` chain on the CPU, judged
as the swap-quality test judges them (tests/pipeline/test_swap_quality.py): the target's top square
at 480x480 as one I420 frame, the third frame of each pair's session (a tracked face, what a viewer
sees), and the target's own mesh read off that square for measures that need the face's parts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import av
import numpy as np
import torch

SIZE = 480
FRAMES = 3  # of the target, per pair: the last is judged
FRAME_INTERVAL_S = 1 / 30  # media times as a 30 fps camera's: the smoothing measures time by them


@dataclass(frozen=True)
class PairSwap:
    """One swap: the target square and the output (RGB [SIZE, SIZE, 3] uint8), and the target's
    mesh points [468, 2] in that square's pixels."""

    source: str
    target: str
    target_rgb: np.ndarray
    output_rgb: np.ndarray
    target_points: np.ndarray


def judged_photos() -> tuple[dict[str, np.ndarray], dict[str, str], str]:
    """(name -> RGB photo, name -> person, which set): the quality set (support/quality_photos.py)
    when it exists, else the six photos of the 24-pair test."""
    try:
        from support.quality_photos import quality_set
    except ImportError:
        from support.photos import PEOPLE, face_rgb

        return {name: face_rgb(name) for name in PEOPLE}, dict(PEOPLE), "the 24-pair test's six photos"
    photos, people = {}, {}
    for photo in quality_set():
        photos[photo.name] = photo.rgb
        people[photo.name] = photo.person
    return photos, people, "the quality set (tests/support/quality_photos.py)"


def different_people(people: dict[str, str]) -> list[tuple[str, str]]:
    """Every ordered (source, target) pair of photos of two different people."""
    return [(source, target) for source in people for target in people if people[source] != people[target]]


def square_frame(rgb: np.ndarray) -> np.ndarray:
    """The top square of a portrait (where the face is), SIZExSIZE, as I420."""
    height, width = rgb.shape[:2]
    side = min(height, width)
    top = np.ascontiguousarray(rgb[:side, (width - side) // 2 : (width - side) // 2 + side])
    return av.VideoFrame.from_ndarray(top, format="rgb24").reformat(SIZE, SIZE, format="yuv420p").to_ndarray()


def rgb_of(i420: np.ndarray) -> np.ndarray:
    return av.VideoFrame.from_ndarray(i420, format="yuv420p").to_ndarray(format="rgb24")


class NotSwapped(RuntimeError):
    """The chain passed the pair's target frame through: it found no face there, or the source was
    not usable."""


class PairSwapper:
    """Today's mesh chain with the photos uploaded once each."""

    def __init__(self) -> None:
        from pipeline.chains import create_chain
        from pipeline.faces import FaceLibrary

        self.faces = FaceLibrary()
        self.chain = create_chain("mesh", torch.device("cpu"), self.faces)
        self._ids: dict[str, str] = {}

    def upload(self, name: str, rgb: np.ndarray) -> None:
        if name not in self._ids:
            analysis = self.chain.analysis.analyse(rgb)
            self._ids[name] = self.faces.add(rgb, owner="q", format="x", size_bytes=0, analysis=analysis).id

    def target_points(self, rgb: np.ndarray) -> np.ndarray:
        """The mesh [468, 2] of the largest face of an RGB frame, as the quality test measures it."""
        from pipeline.swap.source import mesh_points

        frame = torch.from_numpy(np.ascontiguousarray(rgb))[None]
        found = self.chain.detector.detect(frame)[0]
        if not len(found.boxes):
            raise LookupError("no face in the target")
        k = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
        index = torch.zeros(1, dtype=torch.long)
        points, _ = mesh_points(frame, found.boxes[k : k + 1], found.keypoints[k : k + 1, :2], index, self.chain.mesher)
        return points[0, :, :2].numpy()

    def swap(self, photos: dict[str, np.ndarray], source: str, target: str) -> PairSwap | None:
        """One pair swapped, or None where the chain does not swap it."""
        try:
            return next(self.swaps(photos, [(source, target)]))
        except NotSwapped:
            return None

    def swaps(self, photos: dict[str, np.ndarray], pairs: Iterable[tuple[str, str]]) -> Iterator[PairSwap]:
        """Each (source, target) pair of photo names swapped; a pair the chain does not swap raises
        NotSwapped (`swap` goes on past it)."""
        from pipeline.chain import ChainItem

        squares: dict[str, np.ndarray] = {}
        points: dict[str, np.ndarray] = {}
        for source, target in pairs:
            self.upload(source, photos[source])
            if target not in squares:
                squares[target] = square_frame(photos[target])
                points[target] = self.target_points(rgb_of(squares[target]))
            for frame in range(FRAMES):
                item = ChainItem(
                    f"{source}->{target}",
                    squares[target],
                    {"face_id": self._ids[source]},
                    time=frame * FRAME_INTERVAL_S,
                )
                out = self.chain.run([item])[0]
            if out is None:
                raise NotSwapped(f"{source} -> {target}: no face swapped")
            yield PairSwap(source, target, rgb_of(squares[target]), rgb_of(out), points[target])
