"""The partial transfer of the source's proportions (pipeline/swap/shape_transfer.py), on a
synthetic mirror-symmetric mesh: the same proportions move nothing, other proportions move the
features toward the source's, an eye moves as one (its opening kept), the lips stay, a turned head
takes the move in its own pose, and no point moves past the cap."""

import math

import torch

from pipeline.swap import shape_transfer
from pipeline.swap.frontal_pose import symmetric_layout
from pipeline.swap.mirror_pairs import MIRROR_PAIRS
from pipeline.swap.topology import EYE_IMAGE_LEFT, EYE_IMAGE_LEFT_LIDS, INNER_LIPS, MOUTH_LIPS
from support.torch_calls import TorchCalls


def symmetric_face(seed: int = 0) -> torch.Tensor:
    """[468, 3]: a frontal, exactly mirror-symmetric cloud with FaceMesh's pairing, about 200 px
    wide, the image-left eye's outer corner (33) left of the image-right one's (263)."""
    generator = torch.Generator().manual_seed(seed)
    points = torch.zeros(468, 3)
    for index, partner in enumerate(MIRROR_PAIRS):
        if partner < index:
            continue
        x, y, z = (torch.rand(3, generator=generator) * torch.tensor([100.0, 200.0, 60.0])).tolist()
        x = 0.0 if partner == index else x
        points[index] = torch.tensor([-x, y, z])
        points[partner] = torch.tensor([x, y, z])
    # top of the forehead above the chin, the eye corners where a face has them
    points[10] = torch.tensor([0.0, 0.0, 10.0])
    points[152] = torch.tensor([0.0, 200.0, 10.0])
    points[33], points[263] = torch.tensor([-60.0, 80.0, 20.0]), torch.tensor([60.0, 80.0, 20.0])
    return points + torch.tensor([320.0, 140.0, 0.0])


def layout_of(points: torch.Tensor) -> torch.Tensor:
    return symmetric_layout(points - points.mean(dim=0))


def offsets(target: torch.Tensor, source_layout: torch.Tensor, strength: float = 1.0, most: float = 10.0):
    saved = shape_transfer.STRENGTH, shape_transfer.MOST
    shape_transfer.STRENGTH, shape_transfer.MOST = strength, most
    try:
        return shape_transfer.shape_offsets(target[None], source_layout[None])[0]
    finally:
        shape_transfer.STRENGTH, shape_transfer.MOST = saved


def wider_eyes(points: torch.Tensor, by: float) -> torch.Tensor:
    """The same face with both eyes' contours moved `by` px outwards (mirror-symmetric)."""
    moved = points.clone()
    eye = list(EYE_IMAGE_LEFT)
    partners = [MIRROR_PAIRS[i] for i in eye]
    moved[eye, 0] -= by
    moved[partners, 0] += by
    return moved


def test_the_same_proportions_move_nothing():
    face = symmetric_face()
    # the source's layout at another scale and place: proportions are what count
    moved = offsets(face, layout_of(face) * 1.7 + 25.0)
    assert float(moved.norm(dim=-1).max()) < 1e-3


def test_features_move_toward_the_sources_and_an_eye_moves_as_one():
    face = symmetric_face()
    source = wider_eyes(face, 8.0)
    # the source's eyes and mouth open wider than the target's: that is expression, not shape
    for upper, _lower in (EYE_IMAGE_LEFT_LIDS, MOUTH_LIPS):
        for point in (upper, MIRROR_PAIRS[upper]):
            source[point, 1] -= 6.0
    moved = offsets(face, layout_of(source), strength=0.5)
    eye = list(EYE_IMAGE_LEFT)
    assert float(moved[eye, 0].mean()) < -1.0, "the image-left eye moves out, to the left"
    assert float(moved[[MIRROR_PAIRS[i] for i in eye], 0].mean()) > 1.0
    # every point of the eye by the same: its lids' opening is the target's
    upper, lower = EYE_IMAGE_LEFT_LIDS
    assert torch.allclose(moved[upper], moved[lower], atol=1e-4)
    # the lips stay where the target's are
    assert float(moved[list(INNER_LIPS)].abs().max()) < 1e-6


def test_strength_scales_the_move_and_the_cap_holds():
    face = symmetric_face()
    source = layout_of(wider_eyes(face, 8.0))
    full, half = offsets(face, source, 1.0), offsets(face, source, 0.5)
    assert torch.allclose(half, full * 0.5, atol=1e-4)
    iod = float((face[33, :2] - face[263, :2]).norm())
    capped = offsets(face, source, 1.0, most=0.01)
    assert float(capped.norm(dim=-1).max()) <= 0.01 * iod + 1e-4
    assert float(full.norm(dim=-1).max()) > 0.01 * iod  # the cap did something


def turned(face: torch.Tensor, radians: float) -> torch.Tensor:
    """The face turned about its vertical axis (a yaw)."""
    turn = torch.tensor(
        [[math.cos(radians), 0.0, math.sin(radians)], [0.0, 1.0, 0.0], [-math.sin(radians), 0.0, math.cos(radians)]]
    )
    centre = face.mean(dim=0)
    return (face - centre) @ turn.T + centre


def test_a_turned_head_takes_the_move_in_its_own_pose():
    face = symmetric_face()
    source = layout_of(wider_eyes(face, 8.0))
    angle = math.radians(30)
    frontal, on_turned = offsets(face, source), offsets(turned(face, angle), source)
    eye = list(EYE_IMAGE_LEFT)
    # across the face foreshortened by the turn, as the eye itself is
    ratio = float(on_turned[eye, 0].mean() / frontal[eye, 0].mean())
    assert abs(ratio - math.cos(angle)) < 0.05


def count_torch_calls(run) -> tuple[int, int]:
    """(aten ops, host reads) of one `run`, after a first that makes the constants."""
    run()
    with TorchCalls() as calls:
        run()
    return calls.ops.total(), calls.reads.total()


def test_a_batch_of_faces_gets_each_faces_own_offsets_with_the_same_ops_as_one_face():
    """Issue #37: about the same launches whatever the faces, nothing read back; each face as if alone."""
    targets = torch.stack([turned(symmetric_face(seed), 0.05 * seed) for seed in range(16)])
    sources = torch.stack([layout_of(wider_eyes(symmetric_face(seed + 20), 6.0)) for seed in range(16)])
    together = shape_transfer.shape_offsets(targets, sources)
    alone = torch.cat([shape_transfer.shape_offsets(targets[i : i + 1], sources[i : i + 1]) for i in range(16)])
    assert torch.allclose(together, alone, atol=1e-4)
    one = count_torch_calls(lambda: shape_transfer.shape_offsets(targets[:1], sources[:1]))
    sixteen = count_torch_calls(lambda: shape_transfer.shape_offsets(targets, sources))
    assert sixteen[0] <= 1.1 * one[0] and one[1] == sixteen[1] == 0, (one, sixteen)  # (the loop: 16x the ops)
