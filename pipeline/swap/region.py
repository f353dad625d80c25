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


def face_regions(points: torch.Tensor, frame_index: torch.Tensor, size: int, margin: float = DEFAULT_MARGIN) -> FaceRegions:
    """Square regions centred on each mesh's bounding box (points [N, K, 2+] in frame pixels)."""
    xy = points[..., :2]
    low, high = xy.amin(dim=1), xy.amax(dim=1)
    side = (high - low).amax(dim=1).clamp_min(1.0) * margin
    origin = (low + high) / 2 - side[:, None] / 2
    window_origin = origin.floor()
    # a size read back to the host once per batch: the window's shape
    window = int(math.ceil(float((side[:, None] + origin - window_origin).amax()))) + 1 if len(side) else 1
    return FaceRegions(origin, side, size, frame_index.to(points.device, torch.long), window_origin.long(), window)


def _window_index(regions: FaceRegions, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    steps = torch.arange(regions.window, device=regions.origin.device)
    xs = regions.window_origin[:, 0:1] + steps  # [N, P]
    ys = regions.window_origin[:, 1:2] + steps
    valid = ((ys >= 0) & (ys < height))[:, :, None] & ((xs >= 0) & (xs < width))[:, None, :]  # [N, P, P]
    return ys.clamp(0, height - 1), xs.clamp(0, width - 1), valid


def read_regions(frames: torch.Tensor, regions: FaceRegions) -> torch.Tensor:
    """Each face's region [N, 3, R, R] of its frame (frames [B, 3, H, W] float), bilinear; zeros
    outside the frame."""
    _, channels, height, width = frames.shape
    ys, xs, valid = _window_index(regions, height, width)
    rows = regions.frame_index[:, None, None, None] * channels + torch.arange(channels, device=frames.device)[:, None, None]
    cols = ys[:, None, :, None] * width + xs[:, None, None, :]  # [N, 1, P, P]
    window = frames.reshape(-1, height * width)[rows, cols] * valid[:, None]  # [N, C, P, P]
    # region pixel centre u + 0.5 -> frame x = origin + (u + 0.5) * side / R -> window grid coords
    size, p = regions.size, regions.window
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


def add_to_frames(frames: torch.Tensor, regions: FaceRegions, change: torch.Tensor) -> torch.Tensor:
    """frames [B, C, H, W] plus each face's region change [N, C, R, R], mapped back to frame
    pixels; a new tensor. Changes of overlapping faces add up."""
    _, channels, height, width = frames.shape
    ys, xs, valid = _window_index(regions, height, width)
    window = region_to_window(change, regions) * valid[:, None]
    fi = regions.frame_index[:, None, None, None]
    ch = torch.arange(channels, device=frames.device)[None, :, None, None]
    out = frames.clone()
    out.index_put_((fi, ch, ys[:, None, :, None], xs[:, None, None, :]), window, accumulate=True)
    return out
