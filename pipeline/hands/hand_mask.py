"""Where a hand is, from its 21 landmarks: a soft mask the swap stays out of.

Each bone of the hand (MediaPipe's hand connections) is drawn as a capsule as thick as a finger
(the distance between the index and middle fingers' bases), and the palm is filled with the
triangles between the wrist and the fingers' bases; the edge is feathered.
"""

from __future__ import annotations

import torch

from pipeline.hands.hand_landmarks import Hands

BONES = (
    (0, 1), (1, 2), (2, 3), (3, 4), (0, 5), (5, 6), (6, 7), (7, 8), (5, 9), (9, 10), (10, 11), (11, 12),
    (9, 13), (13, 14), (14, 15), (15, 16), (13, 17), (0, 17), (17, 18), (18, 19), (19, 20),
)  # fmt: skip
PALM = ((0, 1, 5), (0, 5, 9), (0, 9, 13), (0, 13, 17))
FINGER_WIDTH = (5, 9)  # the index and middle fingers' bases: about one finger apart
RADIUS = 0.6  # capsule radius, in finger widths (generous: a finger's edge stays the hand's)
FEATHER = 0.3  # soft edge, in finger widths


def hand_masks(
    hands: list[Hands], height: int, width: int, device: torch.device, origin: tuple[int, int] = (0, 0)
) -> torch.Tensor | None:
    """[B, 1, H, W] in [0, 1]: 1 on the hands of each frame; None when no frame has a hand. The
    masks cover frame pixels [top, top + H) x [left, left + W), origin = (top, left)."""
    if not any(len(found) for found in hands):
        return None
    masks = torch.zeros(len(hands), 1, height, width, device=device)
    shift = torch.tensor([origin[1], origin[0]], device=device, dtype=torch.float32)
    for frame, found in enumerate(hands):
        for points in found.points.to(device) - shift:
            finger = float((points[FINGER_WIDTH[0]] - points[FINGER_WIDTH[1]]).norm().clamp_min(2.0))
            radius, feather = RADIUS * finger, FEATHER * finger
            reach = radius + feather
            x0, y0 = (points.min(dim=0).values - reach).floor().clamp_min(0).long().tolist()
            x1 = min(width, int((points[:, 0].max() + reach).ceil()) + 1)
            y1 = min(height, int((points[:, 1].max() + reach).ceil()) + 1)
            if x0 >= x1 or y0 >= y1:
                continue
            ys = torch.arange(y0, y1, device=device, dtype=torch.float32)[:, None, None] + 0.5
            xs = torch.arange(x0, x1, device=device, dtype=torch.float32)[None, :, None] + 0.5
            pixel = torch.stack(torch.broadcast_tensors(xs, ys), dim=-1)[..., 0, :]  # [h, w, 2]
            distance = _distance_to_bones(pixel, points)
            inside = ((radius + feather - distance) / feather).clamp(0.0, 1.0)
            inside = torch.maximum(inside, _in_palm(pixel, points))
            window = masks[frame, 0, y0:y1, x0:x1]
            masks[frame, 0, y0:y1, x0:x1] = torch.maximum(window, inside)
    return masks


def _distance_to_bones(pixel: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """[h, w]: each pixel's distance to the nearest bone segment."""
    a = points[[bone[0] for bone in BONES]]  # [S, 2]
    b = points[[bone[1] for bone in BONES]]
    ab = b - a
    ap = pixel[:, :, None, :] - a  # [h, w, S, 2]
    t = ((ap * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-6)).clamp(0.0, 1.0)
    nearest = a + t[..., None] * ab
    return (pixel[:, :, None, :] - nearest).norm(dim=-1).min(dim=-1).values


def _in_palm(pixel: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """[h, w] {0, 1}: inside any palm triangle (either winding)."""
    inside = torch.zeros(pixel.shape[:2], device=pixel.device)
    for i, j, k in PALM:
        a, b, c = points[i], points[j], points[k]
        d1, d2, d3 = _side(pixel, a, b), _side(pixel, b, c), _side(pixel, c, a)
        same = ((d1 >= 0) & (d2 >= 0) & (d3 >= 0)) | ((d1 <= 0) & (d2 <= 0) & (d3 <= 0))
        inside = torch.maximum(inside, same.float())
    return inside


def _side(pixel: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (b[0] - a[0]) * (pixel[..., 1] - a[1]) - (b[1] - a[1]) * (pixel[..., 0] - a[0])
