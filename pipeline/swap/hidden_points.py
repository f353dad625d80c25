"""Which mesh points of a turned head are hidden behind a nearer part of the same face.

FaceMesh places all 468 points whether they can be seen or not: on a head turned about 45 degrees
the far cheek's points land behind the nose, within a few pixels of the nose's own points. The
warp's spline, made to pass through both, maps neighbouring target pixels to far-apart source
pixels (the far cheek and the nose) and folds there: with biden.jpg as the source, a dark smudge
of his far eye on the nose's bridge and a second outline of a nose around its tip. A point counts
as hidden when another point lies close to it in the picture and well in front of it (FaceMesh's
z, in the same units as x and y); the spline then only loosely follows hidden points (warp.py)
and takes the visible surface's mapping there.

"Close in the picture" is a cell of a coarse depth buffer and its eight neighbours: each point's
z goes into its cell (the nearest kept), so the test costs a scatter and a pooling per batch
instead of comparing all 468 x 468 pairs (0.6 against 3-5 ms per face, both timed on a 2-core
CPU busy with another job).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# Fractions of the face's width in 3D (outline point 234 to 454: the same whatever the turn): the
# depth buffer's cell, and how much nearer the camera a point in or beside a cell must be to
# start hiding a point there, and to hide it fully (a ramp, so that a head turning slowly does not
# switch a point's hold on the spline from one frame to the next).
CELL = 0.03
IN_FRONT_BY = (0.2, 0.3)
FACE_SIDES = (234, 454)
# Cells per side of the buffer, fixed so that no size is read back from the device: a face's mesh
# spans at most 1.26 face widths on the test photos (a mouth wide open), 42 cells.
BUFFER_SIDE = 64


def hidden_points(points: torch.Tensor) -> torch.Tensor:
    """points [N, 468, 3] (x, y in pixels; z, FaceMesh's depth, larger is further) -> [N, 468]
    in [0, 1]: how far each point counts as hidden."""
    n, count, _ = points.shape
    if n == 0:
        return torch.zeros(0, count, device=points.device)
    xyz = points.float()
    width = (xyz[:, FACE_SIDES[1]] - xyz[:, FACE_SIDES[0]]).norm(dim=-1).clamp_min(1e-6)  # [N]
    cells = (xyz[..., :2] - xyz[..., :2].amin(dim=1, keepdim=True)) / (CELL * width)[:, None, None]
    cells = cells.floor().long()  # [N, 468, 2], from 0
    side = BUFFER_SIDE
    cells = cells.clamp(0, side - 1)  # only a broken mesh reaches past the buffer
    flat = (torch.arange(n, device=points.device)[:, None] * side + cells[..., 1]) * side + cells[..., 0]  # [N, 468]
    nearest = torch.full((n * side * side,), math.inf, device=points.device)  # z of the nearest point in each cell
    nearest.scatter_reduce_(0, flat.flatten(), xyz[..., 2].flatten(), reduce="amin")
    nearest = -F.max_pool2d(-nearest.view(n, 1, side, side), 3, stride=1, padding=1)  # and the neighbours'
    behind = (xyz[..., 2] - nearest.flatten()[flat]) / width[:, None]
    start, full = IN_FRONT_BY
    return ((behind - start) / (full - start)).clamp(0.0, 1.0)
