"""The swap outputs the quality tests judge: every source onto every target of another person among
the real test photos, through today's mesh chain on the CPU, read off the third frame of each pair's
session (a tracked face, what a viewer sees), as tests/pipeline/test_swap_quality.py makes them."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from support.pair_swaps import FRAME_INTERVAL_S, FRAMES, different_people, rgb_of, square_frame
from support.photos import PEOPLE, face_rgb

__all__ = ["rgb_of", "square_frame", "swap_outputs"]  # the frame helpers, for the tests that judge these outputs


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
    for source, target in different_people(PEOPLE):
        for frame in range(FRAMES):
            item = ChainItem(
                f"{source}->{target}", frames[target], {"face_id": ids[source]}, time=frame * FRAME_INTERVAL_S
            )
            out = chain.run([item])[0]
        assert out is not None, f"{source} -> {target}: no face swapped"
        yield source, target, out
