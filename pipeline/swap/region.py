"""Each face's working region: a square of frame pixels around its mesh, resampled to a fixed
R x R grid so that faces of any size (and of different frames) stack into one batch and every
mask and blur works in the same relative units.

Reading goes frame -> integer pixel window [N, 3, P, P] (P = the batch's largest region, in
whole frame pixels) -> region [N, 3, R, R]; writing goes back the same way and only *adds a
change* to frame pixels, so a pixel whose change is zero keeps its exact value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

# Region side / the larger side of the mesh's bounding box: room for the feathered,
# dilated mask around the face oval.
DEFAULT_MARGIN = 1.35


@dataclass(frozen=True, eq=False)
class FaceRegions:
    """origin [N, 2]: the region's top-left corner in frame pixels (continuous); side [N]: its side
    in frame pixels; size: R, its side in region pixels; frame_index [N]; window_origin [N, 2]
    (long): the top-left frame pixel of each face's P x P integer window."""

    origin: torch.Tensor
    side: torch.Tensor
    size: int
    frame_index: torch.Tensor
    window_origin: torch.Tensor
    window: int

    def to_region(self, points: torch.Tensor) -> torch.Tensor:
        """Frame pixels [N, K, 2] -> region pixels."""
        return (points[..., :2] - self.origin[:, None]) * (self.size / self.side)[:, None, None]

    def to_frame(self, points: torch.Tensor) -> torch.Tensor:
        """Region pixels [N, K, 2] -> frame pixels."""
        return points[..., :2] * (self.side / self.size)[:, None, None] + self.origin[:, None]


def face_regions(
    points: torch.Tensor, frame_index: torch.Tensor, size: int, margin: float = DEFAULT_MARGIN
) -> FaceRegions:
    """Square regions centred on each mesh's bounding box (points [N, K, 2+] in frame pixels)."""
    xy = points[..., :2]
    low, high = xy.amin(dim=1), xy.amax(dim=1)
    side = (high - low).amax(dim=1).clamp_min(1.0) * margin
    origin = (low + high) / 2 - side[:, None] / 2
    window_origin = origin.floor()
    # a size read back to the host once per batch: the window's shape
    window = int(math.ceil(float((side[:, None] + origin - window_origin).amax()))) + 1 if len(side) else 1
    return FaceRegions(origin, side, size, frame_index.to(points.device, torch.long), window_origin.long(), window)


def covering_window(regions: FaceRegions, height: int, width: int) -> tuple[int, int, int, int]:
    """(top, bottom, left, right): the smallest box of frame pixels (clipped to the H x W frame)
    that holds every face's window, i.e. every pixel a swap of these regions can change."""
    if not len(regions.side):
        return 0, 0, 0, 0
    left, top = regions.window_origin.amin(dim=0).tolist()
    right, bottom = (regions.window_origin.amax(dim=0) + regions.window).tolist()
    return max(0, top), min(height, bottom), max(0, left), min(width, right)


def _in_frame(
    regions: FaceRegions, height: int, width: int, origin: tuple[int, int]
) -> list[tuple[int, slice, slice, slice, slice]]:
    """For each face whose P x P window reaches into frames [.., H, W] that hold frame pixels
    from origin (top, left) on: (face, frames' rows, frames' columns, window rows, window columns)
    of the part inside. Pasting face by face with slices costs a few small copies; a batched
    scatter (index_put) took 2 ms per call on a CPU."""
    parts, p = [], regions.window
    for face, (x0, y0) in enumerate(regions.window_origin.tolist()):
        x0, y0 = x0 - origin[1], y0 - origin[0]  # whole pixels: the result never depends on origin
        top, bottom, left, right = max(y0, 0), min(y0 + p, height), max(x0, 0), min(x0 + p, width)
        if top < bottom and left < right:
            parts.append(
                (
                    face,
                    slice(top, bottom),
                    slice(left, right),
                    slice(top - y0, bottom - y0),
                    slice(left - x0, right - x0),
                )
            )
    return parts


def read_regions(frames: torch.Tensor, regions: FaceRegions, origin: tuple[int, int] = (0, 0)) -> torch.Tensor:
    """Each face's region [N, 3, R, R] of its frame (frames [B, 3, H, W] float, holding frame
    pixels from origin (top, left) on), bilinear; zeros outside them."""
    _, channels, height, width = frames.shape
    count, size, p = len(regions.side), regions.size, regions.window
    window = frames.new_zeros(count, channels, p, p)
    frame_of = regions.frame_index.tolist()
    for face, rows, cols, window_rows, window_cols in _in_frame(regions, height, width, origin):
        window[face, :, window_rows, window_cols] = frames[frame_of[face], :, rows, cols]
    # region pixel centre u + 0.5 -> frame x = origin + (u + 0.5) * side / R -> window grid coords
    centres = (torch.arange(size, device=frames.device) + 0.5) / size  # [R]
    offset = regions.origin - regions.window_origin  # [N, 2]
    gx = 2.0 * (offset[:, 0:1] + centres * regions.side[:, None]) / p - 1.0  # [N, R]
    gy = 2.0 * (offset[:, 1:2] + centres * regions.side[:, None]) / p - 1.0
    grid = torch.stack((gx[:, None, :].expand(-1, size, -1), gy[:, :, None].expand(-1, -1, size)), dim=-1)
    return F.grid_sample(window, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def region_to_window(values: torch.Tensor, regions: FaceRegions) -> torch.Tensor:
    """Region maps [N, C, R, R] resampled onto each face's frame-pixel window [N, C, P, P]
    (zeros outside the region)."""
    p = regions.window
    centres = torch.arange(p, device=values.device) + 0.5  # window pixel centres
    # frame x = window_origin + centre -> region u = (x - origin) * R / side -> grid 2u/R - 1
    offset = regions.window_origin.to(values.dtype) - regions.origin  # [N, 2]
    gx = 2.0 * (offset[:, 0:1] + centres) / regions.side[:, None] - 1.0
    gy = 2.0 * (offset[:, 1:2] + centres) / regions.side[:, None] - 1.0
    grid = torch.stack((gx[:, None, :].expand(-1, p, -1), gy[:, :, None].expand(-1, -1, p)), dim=-1)
    return F.grid_sample(values, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def add_to_frames(
    frames: torch.Tensor, regions: FaceRegions, change: torch.Tensor, origin: tuple[int, int] = (0, 0)
) -> torch.Tensor:
    """frames [B, C, H, W] (frame pixels from origin (top, left) on) plus each face's region
    change [N, C, R, R], mapped back to frame pixels; a new tensor. Changes of overlapping faces add up."""
    _, _, height, width = frames.shape
    window = region_to_window(change, regions)
    out = frames.clone()
    frame_of = regions.frame_index.tolist()
    for face, rows, cols, window_rows, window_cols in _in_frame(regions, height, width, origin):
        out[frame_of[face], :, rows, cols] += window[face, :, window_rows, window_cols]
    return out
