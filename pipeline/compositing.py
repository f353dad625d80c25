"""Writing what the chain changed back into the I420 frames: the swapped faces' window and the
disclosure badge's plate (pipeline/badge.py draws it).

Only the pixels a change covers are converted and written (a U and a V where any pixel of their
2x2 block is): everything else keeps its bytes, bit-exact. Windows are grown to even bounds so
that their 2x2 chroma blocks are the frame's own.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.badge import badge_geometry, draw_badge
from pipeline.color import rgb_to_i420
from pipeline.rgb_frames import RgbFrames
from pipeline.stage_timer import StageTimer

Window = tuple[int, int, int, int]  # top, bottom, left, right: even, in frame pixels


def even_window(top: int, bottom: int, left: int, right: int, height: int, width: int) -> Window:
    """Grown to even bounds, so its 2x2 chroma blocks are the frame's own."""
    return top // 2 * 2, min(height, (bottom + 1) // 2 * 2), left // 2 * 2, min(width, (right + 1) // 2 * 2)


def bounding_window(support: torch.Tensor) -> Window | None:
    """The smallest even window holding every set pixel of support [B, 1, H, W] in any frame."""
    rows = support.any(dim=3).flatten(1).any(dim=0)
    cols = support.any(dim=2).flatten(1).any(dim=0)
    # the first and last set row and column, read back in one go (on CUDA each read is a sync)
    first_row, last_row, first_col, last_col = torch.stack(
        (_first(rows), _first(rows.flip(0)), _first(cols), _first(cols.flip(0)))
    ).tolist()
    if first_row < 0:
        return None
    height, width = support.shape[2:]
    return even_window(first_row, height - last_row, first_col, width - last_col, height, width)


def _first(flags: torch.Tensor) -> torch.Tensor:
    """The index of the first True in a 1-D bool tensor, -1 when none (as a tensor: no read)."""
    found = flags.int().argmax()
    return torch.where(flags.any(), found, -1)


def i420_planes(i420: torch.Tensor, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Views of the Y, U and V planes of I420 frames [B, H*3/2, W] (writing to them writes the frames)."""
    chroma = i420[:, height:].view(i420.shape[0], 2, height // 2, width // 2)
    return i420[:, :height], chroma[:, 0], chroma[:, 1]


def write_window(
    frames: torch.Tensor, rgb: torch.Tensor, support: torch.Tensor, window: Window, origin: tuple[int, int] = (0, 0)
) -> None:
    """Converts one window of the RGB frames to I420 and writes it into `frames` where `support`
    [B, 1, h, w] is set (a U and a V where any pixel of their 2x2 block is); the rest of the
    frames keep their bytes. rgb [B, 3, h, w] and support cover frame pixels from origin
    (top, left, both even) on; `window` is in their pixels. Only the window is converted: the rest
    of the frame never was changed."""
    top, bottom, left, right = window
    converted = rgb_to_i420(rgb[:, :, top:bottom, left:right].contiguous())
    new_y, new_u, new_v = i420_planes(converted, bottom - top, right - left)
    luma = support[:, 0, top:bottom, left:right]
    chroma = F.max_pool2d(luma[:, None].float(), kernel_size=2)[:, 0].bool()
    top, bottom, left, right = top + origin[0], bottom + origin[0], left + origin[1], right + origin[1]
    y, u, v = i420_planes(frames, frames.shape[1] * 2 // 3, frames.shape[2])
    rows, cols = slice(top, bottom), slice(left, right)
    y[:, rows, cols] = torch.where(luma, new_y, y[:, rows, cols])
    half_rows, half_cols = slice(top // 2, bottom // 2), slice(left // 2, right // 2)
    u[:, half_rows, half_cols] = torch.where(chroma, new_u, u[:, half_rows, half_cols])
    v[:, half_rows, half_cols] = torch.where(chroma, new_v, v[:, half_rows, half_cols])


def write_badge(merged: torch.Tensor, frames_rgb: RgbFrames, timer: StageTimer) -> None:
    """Draws the disclosure badge on the RGB frames (over whatever was swapped there) and writes
    its plate into the I420 frames `merged`."""
    rgb, height, width = frames_rgb.tensor, frames_rgb.height, frames_rgb.width
    geometry = badge_geometry(height, width)
    if geometry is None:
        return  # a frame too small to carry it (under about 17x13 pixels)
    plate_top, plate_left, plate_h, plate_w = geometry
    with timer.stage("convert"):
        frames_rgb.window(None, plate_left, plate_top, plate_left + plate_w, plate_top + plate_h)
    with timer.stage("blend"):
        draw_badge(rgb)
        plate_bottom, plate_right = plate_top + plate_h, plate_left + plate_w
        top, bottom, left, right = even_window(plate_top, plate_bottom, plate_left, plate_right, height, width)
        badge = rgb[:, :, top:bottom, left:right]
        plate = torch.zeros_like(badge[:, :1], dtype=torch.bool)
        rows, cols = plate_top - top, plate_left - left
        plate[:, :, rows : rows + plate_h, cols : cols + plate_w] = True
    with timer.stage("convert"):
        write_window(merged, badge, plate, (0, bottom - top, 0, right - left), (top, left))
