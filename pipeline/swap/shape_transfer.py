"""A partial transfer of the source face's proportions onto the target's mesh: where the warp puts
the source's eyes, brows, nose, mouth and outline, moved part of the way from the target's places
toward the source's, so the swapped face is drawn a little more in the source's shape.

The mesh swap otherwise keeps the target's geometry whole, and face shape is much of who a face is
(the 24-pair test's misses are two men of similar colouring, docs/face-chain.md). Both faces are
compared in their frontal, mirror-symmetric layouts (frontal_pose.py; the source texture's points
are already one), scaled onto each other, and the difference is turned back into the target's
pose, so a turned head takes the same proportions as a frontal one. Only proportions move, never
expression: an eye's lids move together (the difference of the eye's centre), so a blink of the
target stays as it is, and the lips stay where the target's are.
"""

from __future__ import annotations

import torch

from pipeline.swap.frontal_pose import heads_axes, index_tensor, symmetric_layout
from pipeline.swap.topology import EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT, EYE_OUTER_CORNERS, INNER_LIPS, OUTER_LIPS

# How far the target's points move toward the source's proportions (0: not at all), and the most
# any point moves, in inter-ocular distances. All the way (1.0, the openings' margin at 0 too)
# took the quality set's SFace from 51.2 to 62.4 % of pairs nearer the source, but moved the
# landmarks re-measured on the output past the chain's limit of 5 % of the inter-ocular distance
# (test_swap_quality, astronaut.png onto obama2.jpg: 0.039 -> 0.054; 0.6: 0.051); 0.3 with the
# lips unmoved keeps the worst pair at 0.040 (bench/results/2026-12-04-identity-levers.md).
STRENGTH = 0.3
MOST = 0.08
# Points that move as one: the lids with their eye's centre.
RIGID_GROUPS = (EYE_IMAGE_LEFT, EYE_IMAGE_RIGHT)
# Points that do not move: the lips. Moved with the mouth's centre, the source's lips no longer
# lay along the target's open mouth, and the target's mouth kept (`keep_eyes_mouth`) showed the
# source's lip line inside it (test_mesh_swap's open-mouth test).
UNMOVED = tuple(sorted(set(INNER_LIPS + OUTER_LIPS)))


def shape_offsets(target_points: torch.Tensor, source_layouts: torch.Tensor) -> torch.Tensor:
    """target_points [N, 468, 3] (frame pixels, FaceMesh's depth in the same units);
    source_layouts [N, 468, 2]: each source's frontal symmetric layout (any scale) -> [N, 468, 2]
    frame pixels to add to the target's x, y: STRENGTH of the proportions' difference, at most
    MOST inter-ocular distances per point."""
    points, source = target_points.float(), source_layouts.float()
    axes = heads_axes(points)  # [N, 3, 3] rows: each head's right, down, back in the picture's axes
    target = symmetric_layout((points - points.mean(dim=1, keepdim=True)) @ axes.transpose(1, 2))
    source = source - source.mean(dim=1, keepdim=True)
    scale = (source * target).sum(dim=(1, 2)) / source.square().sum(dim=(1, 2)).clamp_min(1e-9)
    frontal = scale[:, None, None] * source - target  # [N, 468, 2] in each target's frontal pixels
    for group in RIGID_GROUPS:
        rows = index_tensor(group, frontal.device)
        frontal[:, rows] = frontal[:, rows].mean(dim=1, keepdim=True).expand(-1, len(group), -1)
    frontal = frontal.index_fill(1, index_tensor(UNMOVED, frontal.device), 0.0)
    offsets = (frontal @ axes[:, :2, :2]) * STRENGTH  # back into the picture: x, y of right and down
    iod = (target_points[:, EYE_OUTER_CORNERS[0], :2] - target_points[:, EYE_OUTER_CORNERS[1], :2]).norm(dim=-1)
    most = (MOST * iod)[:, None, None]
    length = offsets.norm(dim=-1, keepdim=True)
    return offsets * (most / length.clamp_min(1e-9)).clamp(max=1.0)
