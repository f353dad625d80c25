"""The `mesh` swap on real photos of hard poses: a head turned about 45 degrees, mouths wide open,
and a real video of a face that laughs, turns and is covered by a hand (tests/support/sdist_photos.py).

What "no tearing, holes or visible seam" is measured as, on each output:
- the detector still finds the face where it was (box IoU with the target's >= 0.6);
- FaceMesh on the output lands within 5 % of the inter-ocular distance of the target's mesh;
- an open mouth stays open: the inner-lip gap moves by at most 0.1 inter-ocular distances;
- edge energy (mean absolute luma gradient) inside the changed pixels stays within 0.7-1.3 times
  the target's: a smeared face loses edges, gross tearing adds them. This is coarse: a small hole
  barely moves it, so holes and seams were also checked by eye on these photos.
And on a head turned about 45 degrees the swap fades out where the source has no detail to show
(pipeline/swap/detail.py) instead of smearing it.
"""

import av
import numpy as np
import pytest
import torch

from pipeline.chain import ChainItem
from pipeline.chains import create_chain
from pipeline.detect import FaceDetector
from pipeline.faces import FaceLibrary
from pipeline.landmarks import FaceMesher
from pipeline.swap import MeshSwapper, analyse_source
from pipeline.swap.source import mesh_points
from support.photos import face_rgb
from support.sdist_photos import grid_tile, photo_rgb, video_frames

pytestmark = pytest.mark.slow

UPPER_INNER_LIP, LOWER_INNER_LIP = 13, 14
OUTER_EYE_CORNERS = (33, 263)


def to_i420(rgb: np.ndarray) -> np.ndarray:
    height, width = rgb.shape[0] // 2 * 2, rgb.shape[1] // 2 * 2
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[:height, :width]), format="rgb24")
    return frame.reformat(format="yuv420p").to_ndarray()


def edge_energy(luma: np.ndarray) -> np.ndarray:
    values = luma.astype(np.float32)
    energy = np.zeros_like(values)
    energy[:, :-1] += np.abs(np.diff(values, axis=1))
    energy[:-1] += np.abs(np.diff(values, axis=0))
    return energy


@pytest.fixture(scope="module")
def swap():
    faces = FaceLibrary()
    chain = create_chain("mesh", torch.device("cpu"), faces)
    chain.warm_up()
    source = face_rgb("biden.jpg")
    face_id = faces.add(source, owner="test", format="jpeg", size_bytes=0, analysis=chain.analysis.analyse(source)).id

    def measure(i420: np.ndarray):
        """The largest face's box and mesh (frame pixels), or None."""
        rgb = torch.from_numpy(av.VideoFrame.from_ndarray(i420, format="yuv420p").to_ndarray(format="rgb24"))[None]
        found = chain.detector.detect(rgb)[0]
        if not len(found.boxes):
            return None
        k = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
        index = torch.zeros(1, dtype=torch.long)
        points, _ = mesh_points(rgb, found.boxes[k : k + 1], found.keypoints[k : k + 1, :2], index, chain.mesher)
        return found.boxes[k], points[0, :, :2]

    def run(session: str, frame: np.ndarray, time: float | None = None):
        return chain.run([ChainItem(session, frame, {"face_id": face_id}, time)])[0]

    return run, measure


@pytest.fixture(scope="module")
def swap_parts():
    """The mesh swapper's intermediates for the largest face of a photo, with biden.jpg as the source."""
    detector, mesher = FaceDetector(torch.device("cpu")), FaceMesher(torch.device("cpu"))
    swapper = MeshSwapper(torch.device("cpu"), region_size=192)
    source = analyse_source(face_rgb("biden.jpg"), detector, mesher)

    def parts(rgb: np.ndarray):
        frame = torch.from_numpy(np.ascontiguousarray(rgb))[None]
        found = detector.detect(frame)[0]
        k = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
        index = torch.zeros(1, dtype=torch.long)
        points, _ = mesh_points(frame, found.boxes[k : k + 1], found.keypoints[k : k + 1, :2], index, mesher)
        frames = frame.permute(0, 3, 1, 2).float() / 255
        return swapper.render(frames, points, index, [source])

    return parts


def box_iou(a: torch.Tensor, b: torch.Tensor) -> float:
    top_left, bottom_right = torch.maximum(a[:2], b[:2]), torch.minimum(a[2:], b[2:])
    inter = float((bottom_right - top_left).clamp(min=0).prod())
    area = lambda box: float((box[2:] - box[:2]).prod())  # noqa: E731
    return inter / (area(a) + area(b) - inter)


def changed_luma(target: np.ndarray, out: np.ndarray) -> np.ndarray:
    height = target.shape[0] * 2 // 3
    changed = target[:height] != out[:height]
    changed[: height // 8, target.shape[1] * 3 // 4 :] = False  # the disclosure badge
    return changed


def edge_ratio(target: np.ndarray, out: np.ndarray, changed: np.ndarray) -> float:
    height = changed.shape[0]
    return float(edge_energy(out[:height])[changed].mean() / edge_energy(target[:height])[changed].mean())


HARD = {
    "turned about 45 degrees": lambda: photo_rgb("45-m7-di-ph.jpg"),
    "mouth open (surprise)": lambda: photo_rgb("0-f1-su-ph.jpg"),
    "screaming": lambda: grid_tile(1, 1),
    "screaming, eyes shut": lambda: grid_tile(2, 0),
    "mouth open wide (O)": lambda: grid_tile(4, 3),
    "tongue out": lambda: grid_tile(4, 0),
}


@pytest.mark.parametrize("case", list(HARD))
def test_hard_poses_swap_without_breaking_the_face(swap, case):
    run, measure = swap
    target = to_i420(HARD[case]())
    outputs = [run(case, target) for _ in range(3)]  # the tracker settles on the face
    out = outputs[-1]
    assert out is not None, f"{case}: not swapped"
    target_box, target_points = measure(target)
    measured = measure(out)
    assert measured is not None, f"{case}: no face found in the output"
    box, points = measured
    inter_ocular = float((target_points[OUTER_EYE_CORNERS[1]] - target_points[OUTER_EYE_CORNERS[0]]).norm())
    moved = float((points - target_points).norm(dim=1).mean()) / inter_ocular
    gap = lambda p: float((p[LOWER_INNER_LIP] - p[UPPER_INNER_LIP]).norm()) / inter_ocular  # noqa: E731
    changed = changed_luma(target, out)
    ratio = edge_ratio(target, out, changed)
    print(
        f"\n{case}: box IoU {box_iou(box, target_box):.2f}, landmarks moved {moved:.3f} IOD, "
        f"mouth gap {gap(target_points):.2f} -> {gap(points):.2f} IOD, edge energy x{ratio:.2f}"
    )
    assert box_iou(box, target_box) >= 0.6
    assert moved <= 0.05
    assert abs(gap(points) - gap(target_points)) <= 0.1
    assert 0.7 <= ratio <= 1.3


def test_a_turned_head_keeps_its_own_near_cheek_where_the_source_has_no_detail(swap_parts):
    """A frontal source has its cheek side foreshortened: on a head turned about 45 degrees the
    swap fades out where the warp would stretch that strip (detail.py) instead of smearing it;
    on frontal faces it fades (almost) nothing. A wide-open mouth stretches the source's closed lips
    and fades a little there."""
    cases = {"turned": photo_rgb("45-m7-di-ph.jpg"), "screaming": grid_tile(1, 1)}
    cases |= {name: face_rgb(name) for name in ("obama.jpg", "astronaut.png", "grace_hopper.jpg")}
    faded = {}
    for case, rgb in cases.items():
        result = swap_parts(rgb)
        skin = result.masks.skin
        faded[case] = 1 - float((result.detail * skin).sum() / skin.sum())
    print("\nshare of the face's skin faded for lack of source detail:", {k: round(v, 3) for k, v in faded.items()})
    assert faded["turned"] > 0.1
    assert all(faded[name] < 0.03 for name in ("obama.jpg", "astronaut.png", "grace_hopper.jpg"))
    assert faded["screaming"] < faded["turned"]


def test_a_real_video_with_a_hand_and_a_turn_is_swapped_steadily(swap):
    """472 frames of a woman laughing, turning and covering her mouth and nose with her hand, every
    4th frame as one session: every frame is swapped or passed through (never an error), most
    are swapped, and the output changes from frame to frame about as much as the input does."""
    run, _ = swap
    step, fps = 4, 24000 / 1001
    frames = [to_i420(rgb) for rgb in video_frames("WolfgangLanger_Pexels.mp4", 0, 472, step=step)]
    # the frames' own times, so the smoothing does not depend on how fast this machine runs
    outputs = [run("video", frame, index * step / fps) for index, frame in enumerate(frames)]
    assert all(out is None or (isinstance(out, np.ndarray) and out.shape == frames[0].shape) for out in outputs)
    swapped = [out is not None for out in outputs]
    print(f"\nswapped {sum(swapped)} of {len(frames)} frames")
    assert sum(swapped) >= 0.9 * len(frames)
    height = frames[0].shape[0] * 2 // 3
    excess = []
    for index in range(1, len(frames)):
        if outputs[index] is None or outputs[index - 1] is None:
            continue
        region = changed_luma(frames[index], outputs[index]) | changed_luma(frames[index - 1], outputs[index - 1])
        step_in = np.abs(frames[index][:height].astype(int) - frames[index - 1][:height])[region].mean()
        step_out = np.abs(outputs[index][:height].astype(int) - outputs[index - 1][:height])[region].mean()
        excess.append(step_out - step_in)
    print(
        f"frame-to-frame change in the face, output minus input: mean {np.mean(excess):.2f}, max {np.max(excess):.2f} grey levels"
    )
    assert np.mean(excess) <= 2.0 and np.max(excess) <= 8.0


def test_a_hand_over_the_mouth_stays_in_front_of_the_swap(swap):
    """facetorch's tile (3, 3): a hand across the mouth. The back of the hand (a box drawn by eye on
    the photo, inside the hand) must come out as it went in (before hands were detected: a change
    of 35 grey levels, the source face showing through the fingers)."""
    run, _ = swap
    target = to_i420(grid_tile(3, 3))
    out = [run("hand", target) for _ in range(3)][-1]
    assert out is not None
    hand = (slice(165, 205), slice(175, 245))
    change = np.abs(out[hand].astype(int) - target[hand]).mean()
    print(f"\nmean luma change on the back of the hand: {change:.1f} grey levels")
    assert change < 3.0
