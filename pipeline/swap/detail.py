"""Where the warp has source detail to show: a weight that fades the swap out where the backward
warp stretches a thin strip of the source over a wide area of the target, or folds it over.

A frontal source photo shows the sides of its face foreshortened; when the target turns its
head (three-quarter view), its near cheek is drawn from that thin strip and comes out as a
bright, blurred smear, and near the nose the spline can fold. Both show as a small or negative
local area ratio of the warp (source pixels per target pixel, the Jacobian determinant of the
sampling grid) compared with the face's own typical ratio. There the target's own skin stays.
On frontal test faces under 0.5 % of the face falls below 0.35; on a head turned about 45
degrees 17 % does (tests/pipeline/test_hard_poses.py's photos).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# Relative local area (to the face's median) from which the source counts as stretched, and
# below which it shows no more; in between the swap fades.
FULL_DETAIL = 0.5
NO_DETAIL = 0.3


def area_ratio(grid: torch.Tensor, source_size: tuple[int, int]) -> torch.Tensor:
    """The sampling grid [N, R, R, 2] (grid_sample coordinates into sources of `source_size`)
    -> [N, 1, R, R]: source pixels per target pixel at each pixel (negative where it folds)."""
    height, width = source_size
    pixels = grid * torch.tensor([width / 2.0, height / 2.0], device=grid.device, dtype=grid.dtype)
    along_x = torch.diff(pixels, dim=2, append=pixels[:, :, -1:] * 2 - pixels[:, :, -2:-1])
    along_y = torch.diff(pixels, dim=1, append=pixels[:, -1:] * 2 - pixels[:, -2:-1])
    det = along_x[..., 0] * along_y[..., 1] - along_y[..., 0] * along_x[..., 1]
    return det[:, None]


def detail_weight(grid: torch.Tensor, source_size: tuple[int, int], skin: torch.Tensor, step: int = 4) -> torch.Tensor:
    """[N, 1, R, R] in [0, 1]: 1 where the warp keeps the source's detail, fading to 0 where it
    stretches the source thin or folds it; relative to each face's median over its skin mask.

    Computed on every `step`th pixel (the warp is smooth: its spline is evaluated on a coarse
    lattice anyway) and scaled up bilinearly: a sixteenth of the work at step 4."""
    size = grid.shape[1]
    ratio = area_ratio(grid[:, ::step, ::step], source_size)
    inside = skin[:, :, ::step, ::step] > 0.5
    typical = torch.where(inside, ratio, torch.full_like(ratio, float("nan"))).flatten(1).nanmedian(dim=1).values
    typical = torch.nan_to_num(typical, nan=1.0).clamp_min(1e-6)  # a face with no skin mask: no fading
    relative = ratio / typical[:, None, None, None]
    weight = ((relative - NO_DETAIL) / (FULL_DETAIL - NO_DETAIL)).clamp(0.0, 1.0)
    return F.interpolate(weight, size=(size, size), mode="bilinear", align_corners=False)  # smooth enough
