"""The swap outputs the quality tests judge: every source onto every target of another person among
the real test photos, through today's mesh chain on the CPU, read off the third frame of each pair's
session (a tracked face, what a viewer sees), as tests/pipeline/test_swap_quality.py makes them."""

from __future__ import annotations

from collections.abc import Iterator

import av
import numpy as np
import torch

from support.photos import PEOPLE, face_rgb

SIZE = 480
FRAMES = 3  # of the target, per pair: the last is judged
FRAME_INTERVAL_S = 1 / 30  # media times as a 30 fps camera's: the smoothing measures time by them


def square_frame(rgb: np.ndarray) -> np.ndarray:
    """The top square of a portrait (where the face is), SIZExSIZE, as I420."""
    height, width = rgb.shape[:2]
    side = min(height, width)
    top = np.ascontiguousarray(rgb[:side, (width - side) // 2 : (width - side) // 2 + side])
    return av.VideoFrame.from_ndarray(top, format="rgb24").reformat(SIZE, SIZE, format="yuv420p").to_ndarray()


def rgb_of(i420: np.ndarray) -> np.ndarray:
    return av.VideoFrame.from_ndarray(i420, format="yuv420p").to_ndarray(format="rgb24")


def different_people() -> list[tuple[str, str]]:
    """Every ordered (source, target) pair of photos of two different people."""
    return [(source, target) for source in PEOPLE for target in PEOPLE if PEOPLE[source] != PEOPLE[target]]


def swap_outputs() -> Iterator[tuple[str, str, np.ndarray]]:
    """(source, target, output I420) for every pair of different people."""
    from pipeline.chain import ChainItem
    from pipeline.chains import create_chain
    from pipeline.faces import FaceLibrary

    faces = FaceLibrary()
    chain = create_chain("mesh", torch.device("cpu"), faces)
    ids = {
        name: faces.add(
            face_rgb(name), owner="q", format="x", size_bytes=0, analysis=chain.analysis.analyse(face_rgb(name))
        ).id
        for name in PEOPLE
    }
    frames = {name: square_frame(face_rgb(name)) for name in PEOPLE}
    for source, target in different_people():
        for frame in range(FRAMES):
            item = ChainItem(
                f"{source}->{target}", frames[target], {"face_id": ids[source]}, time=frame * FRAME_INTERVAL_S
            )
            out = chain.run([item])[0]
        assert out is not None, f"{source} -> {target}: no face swapped"
        yield source, target, out
