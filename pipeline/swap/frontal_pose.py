"""A face's mesh turned to face the camera: the rotation that undoes a head's yaw, pitch and
roll, found from the face's own left/right symmetry (no reference face needed).

FaceMesh's 468 points come in mirror pairs (mirror_pairs.py). On a real head the vector from a
point to its partner runs along the head's left-right axis, whatever the pose: that axis is the
main direction of those vectors. The head's up-down axis is the forehead-to-chin line made
square to it, and depth is the third. Written in those axes the face looks straight at the
camera; its x, y are the frontal layout the source texture is drawn in (source_texture.py).
"""

from __future__ import annotations

import functools

import torch

from pipeline.swap.mirror_pairs import MIRROR_PAIRS

# The top of the forehead and the chin on the face's midline: the up-down axis.
FOREHEAD_TOP, CHIN = 10, 152
# Outer eye corners, image-left then image-right: which way the left-right axis points.
EYE_CORNERS = (33, 263)


def head_axes(points: torch.Tensor, pairs: tuple[int, ...] = MIRROR_PAIRS) -> torch.Tensor:
    """points [468, 3] (x, y in pixels, y down; z FaceMesh's depth, larger is further) -> [3, 3]
    rows: the head's own left-to-right, top-to-bottom and front-to-back axes in the picture's
    coordinates (a rotation: orthonormal, determinant 1). pairs: each point's mirror partner (by
    index; itself on the midline)."""
    return heads_axes(points[None], pairs)[0]


def heads_axes(points: torch.Tensor, pairs: tuple[int, ...] = MIRROR_PAIRS) -> torch.Tensor:
    """head_axes of a batch: points [N, 468, 3] -> [N, 3, 3], the same ops whatever N and nothing
    read back to the host (on CUDA a read is a sync; issue #37)."""
    xyz = points.double()
    across = (
        xyz[:, index_tensor(pairs, points.device)] - xyz
    )  # each pair twice, once each way: the sign does not matter
    _, _, vh = torch.linalg.svd(across, full_matrices=False)
    right = vh[:, 0]
    eyes = xyz[:, EYE_CORNERS[1]] - xyz[:, EYE_CORNERS[0]]
    right = torch.where(((eyes * right).sum(dim=-1) < 0)[:, None], -right, right)
    down = xyz[:, CHIN] - xyz[:, FOREHEAD_TOP]
    down = down - (down * right).sum(dim=-1, keepdim=True) * right
    down = down / down.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    back = torch.linalg.cross(right, down)
    return torch.stack((right, down, back), dim=1).to(points.dtype)


@functools.cache
def index_tensor(indices: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """A constant index as a device tensor, made once per device (a tensor from Python data is an
    upload each time)."""
    return torch.tensor(indices, device=device)


def frontal_points(points: torch.Tensor) -> torch.Tensor:
    """points [468, 3] -> [468, 3]: the same mesh turned to face the camera, centred on its
    midline (x = 0 between each pair), in the same units."""
    axes = head_axes(points)
    centred = points - points.mean(dim=0)
    return centred @ axes.T


def symmetric_layout(frontal: torch.Tensor) -> torch.Tensor:
    """frontal [..., 468, 3+] -> [..., 468, 2]: x, y made exactly mirror-symmetric about x = 0 (each point
    and its partner averaged, x negated), so that the mirror of the layout is a horizontal flip."""
    partner = index_tensor(MIRROR_PAIRS, frontal.device)
    mirrored = frontal[..., partner, :]
    x = (frontal[..., 0] - mirrored[..., 0]) / 2
    y = (frontal[..., 1] + mirrored[..., 1]) / 2
    return torch.stack((x, y), dim=-1)


def yaw_degrees(points: torch.Tensor) -> float:
    """How far the head is turned left or right, in degrees (0 facing the camera): the angle of
    its left-right axis out of the picture's plane, about the vertical."""
    right = head_axes(points)[0].double()
    return float(torch.rad2deg(torch.atan2(right[2], right[0])))


def frontal_points_with(points: torch.Tensor, pairs: tuple[int, ...]) -> torch.Tensor:
    """`frontal_points` with a given pairing (mirror_pairs.derive_mirror_pairs, before the pairs are known)."""
    axes = head_axes(points, pairs)
    return (points - points.mean(dim=0)) @ axes.T
