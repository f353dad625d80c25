"""The disclosure badge: a small, legible "AI" in a corner of every swapped frame.

Deep-fake disclosure rules ask that viewers can tell synthetic video; the badge is
drawn on the device as part of the blend (a few tensor writes per frame), white
letters on a dark plate so it reads on any background.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

# 5x7 bitmaps, one row per string, '#' = ink.
_GLYPHS = {
    "A": (".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#"),
    "I": ("#####", "..#..", "..#..", "..#..", "..#..", "..#..", "#####"),
}
_TEXT = "AI"


def _text_mask() -> torch.Tensor:
    """[7, W] float mask of the text with one blank column between letters."""
    columns: list[list[float]] = []
    for index, letter in enumerate(_TEXT):
        if index:
            columns.append([0.0] * 7)
        glyph = _GLYPHS[letter]
        for x in range(5):
            columns.append([1.0 if glyph[y][x] == "#" else 0.0 for y in range(7)])
    return torch.tensor(columns).T


def badge_geometry(height: int, width: int) -> tuple[int, int, int, int] | None:
    """(top, left, plate height, plate width) of the badge in a frame: top-right, ~1/18 of the height,
    smaller where the frame is too narrow for that (a tall, narrow frame is still marked); None for a
    frame too small to hold even 1-pixel letters."""
    margin = max(4, min(height // 60, width // 16))
    # 7 rows of glyph * scale + margins ~= height / 18; 11 columns + margins across
    scale = min(max(2, height // 126), (width - margin) // 13, (height - margin) // 9)
    if scale < 1:
        return None
    plate_h = 7 * scale + 2 * scale
    plate_w = 11 * scale + 2 * scale
    return margin, width - margin - plate_w, plate_h, plate_w


def draw_badge(frames: torch.Tensor) -> torch.Tensor:
    """Draws the badge on [B, 3, H, W] float RGB frames in [0, 1], in place; returns them."""
    _, _, height, width = frames.shape
    geometry = badge_geometry(height, width)
    if geometry is None:
        return frames  # a frame too small to carry it at all
    top, left, plate_h, plate_w = geometry
    scale = (plate_h) // 9
    ink = F.interpolate(_text_mask()[None, None].to(frames.device, frames.dtype), scale_factor=scale, mode="nearest")[
        0, 0
    ]
    plate = frames[:, :, top : top + plate_h, left : left + plate_w]
    plate.mul_(0.35)  # darken what is behind: the plate stays see-through but the letters read
    y0, x0 = scale, scale
    region = plate[:, :, y0 : y0 + ink.shape[0], x0 : x0 + ink.shape[1]]
    region.copy_(region * (1 - ink) + ink)
    return frames
