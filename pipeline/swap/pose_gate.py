"""How much of a swap to show for a face's pose: full for frontal to three-quarter views, fading
out beyond what the mesh warp does well (a strongly turned head shows the source's face folded
onto the visible half).

Yaw is read off the mesh: how far the nose tip sits from the midpoint of the outer eye corners,
in inter-ocular distances (about 0 frontal, about 0.5 near 45 degrees of turn). The smoothed
landmarks make the weight change smoothly from frame to frame.
"""

from __future__ import annotations

import torch

NOSE_TIP = 1
OUTER_EYE_CORNERS = (33, 263)  # image left, image right


def turn(points: torch.Tensor) -> torch.Tensor:
    """[N, 468, 2+] mesh points -> [N] signed yaw proxy (nose offset / inter-ocular distance)."""
    xy = points[..., :2]
    left, right = xy[:, OUTER_EYE_CORNERS[0]], xy[:, OUTER_EYE_CORNERS[1]]
    axis = right - left
    distance = axis.norm(dim=1).clamp_min(1e-6)
    offset = xy[:, NOSE_TIP] - (left + right) / 2
    return (offset * axis).sum(dim=1) / distance**2  # along the eye line, in inter-ocular distances


def pose_weight(points: torch.Tensor, full_until: float = 0.45, gone_at: float = 0.7) -> torch.Tensor:
    """[N] in [0, 1]: 1 up to about 45 degrees of turn, fading linearly to 0 by `gone_at`."""
    amount = turn(points).abs()
    return ((gone_at - amount) / (gone_at - full_until)).clamp(0.0, 1.0)
