"""Face crops cut from full frames on the device, and the way back to frame pixels.

Coordinates are continuous pixels with the image's top-left corner at (0, 0), so pixel (i, j)
covers [i, i+1) x [j, j+1); the crop and the frame use the same convention (grid_sample with
align_corners=False). A transform is a [2, 3] affine matrix taking crop pixels to frame pixels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.model_input import as_float_rgb, frame_size
from pipeline.sampling import affine_grid, frames_per_crop

# MediaPipe's face mesh indices of the outer eye corners, image-left and image-right
LEFT_EYE_CORNER = 33
RIGHT_EYE_CORNER = 263


def crop_faces(
    frames: torch.Tensor,
    boxes: torch.Tensor,
    frame_index: torch.Tensor,
    *,
    eyes: torch.Tensor | None = None,
    scale: float = 1.5,
    size: int = 192,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Square crops around faces, one per box, batched on the frames' device.

    frames: [B, 3, H, W] float RGB in [0, 1] or [B, H, W, 3] uint8 RGB (model_input.py).
    boxes: [N, 4] (x0, y0, x1, y1) face boxes in frame pixels.
    frame_index: [N] which frame each box is in. eyes: optional [N, 2, 2] (x, y) of the
    image-left and image-right eye; the crop is then rotated so that the eyes lie level.
    Each crop is the box's longer side times `scale`, centred on the box (MediaPipe's ROI).

    Returns crops [N, 3, size, size] float32 RGB in [0, 1] (zeros outside the frame) and
    transforms [N, 2, 3] float32 taking crop pixels to frame pixels. Cost: grid_sample reads
    float input, so uint8 frames are converted to float whole, once per face.
    """
    count = boxes.shape[0]
    if boxes.shape != (count, 4) or frame_index.shape != (count,):
        raise ValueError(
            f"boxes must be [N, 4] and frame_index [N], got {tuple(boxes.shape)}, {tuple(frame_index.shape)}"
        )
    if eyes is not None and eyes.shape != (count, 2, 2):
        raise ValueError(f"eyes must be [N, 2, 2], got {tuple(eyes.shape)}")
    device = frames.device
    height, width = frame_size(frames)
    if count == 0:
        return torch.zeros(0, 3, size, size, device=device), torch.zeros(0, 2, 3, device=device)

    centre, side, cos, sin = _square(boxes.to(device), None if eyes is None else eyes.to(device), scale)
    step = side / size  # frame pixels per crop pixel
    linear = torch.stack((torch.stack((cos, -sin), 1), torch.stack((sin, cos), 1)), 1) * step[:, None, None]
    # frame = centre + linear @ (crop - size/2)
    offset = centre - linear.sum(dim=2) * (size / 2)
    transforms = torch.cat((linear, offset[:, :, None]), dim=2)

    # affine_grid maps output [-1, 1] coordinates to input [-1, 1] coordinates:
    # crop = (out + 1) * size/2 and input = 2 * frame / (W, H) - 1, so
    # input = diag(2/W, 2/H) @ (linear * size/2 @ out + centre) - 1
    to_unit = torch.stack((torch.full_like(cos, 2.0 / width), torch.full_like(cos, 2.0 / height)), 1)  # [N, 2]
    theta = torch.cat((linear * (size / 2) * to_unit[:, :, None], (centre * to_unit - 1)[:, :, None]), dim=2)
    grid = affine_grid(theta, size)
    source = as_float_rgb(frames_per_crop(frames, frame_index))
    crops = F.grid_sample(source, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return crops, transforms


def crop_extents(boxes: torch.Tensor, eyes: torch.Tensor | None = None, scale: float = 1.5) -> torch.Tensor:
    """[N, 4] (x0, y0, x1, y1): the frame pixels each of `crop_faces`' crops covers (its turned
    square's upright bounds)."""
    centre, side, cos, sin = _square(boxes, eyes, scale)
    half = (side * (cos.abs() + sin.abs()) / 2)[:, None]
    return torch.cat((centre - half, centre + half), dim=1)


def _square(boxes: torch.Tensor, eyes: torch.Tensor | None, scale: float) -> tuple[torch.Tensor, ...]:
    """Each crop's centre [N, 2], side [N] and turn (cos, sin [N]): the box's longer side times
    `scale`, centred on it, turned so that the eyes lie level."""
    boxes = boxes.float()
    centre = (boxes[:, :2] + boxes[:, 2:]) / 2
    side = (boxes[:, 2:] - boxes[:, :2]).amax(dim=1) * scale
    if eyes is None:
        return centre, side, torch.ones_like(side), torch.zeros_like(side)
    delta = eyes[:, 1].float() - eyes[:, 0].float()
    angle = torch.atan2(delta[:, 1], delta[:, 0])
    return centre, side, torch.cos(angle), torch.sin(angle)


def to_frame_coords(points: torch.Tensor, transforms: torch.Tensor) -> torch.Tensor:
    """Crop-pixel points [N, K, 2 or 3] -> frame pixels. z (if present) is scaled like x and y."""
    transforms = transforms.to(points.device, points.dtype)
    linear, offset = transforms[:, :, :2], transforms[:, :, 2]
    xy = points[..., :2] @ linear.transpose(1, 2) + offset[:, None, :]
    if points.shape[-1] == 2:
        return xy
    step = linear.det().abs().sqrt()
    return torch.cat((xy, points[..., 2:] * step[:, None, None]), dim=-1)


def boxes_from_points(points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Boxes [N, 4] and eyes [N, 2, 2] for the next frame's `crop_faces`, from mesh points
    [N, K, 2 or 3] in frame pixels (MediaPipe's tracking ROI).

    The box is the points' extent measured along the eye line and across it, written as
    centre -/+ half extents, so that `crop_faces(..., eyes=eyes)` crops it upright.
    """
    xy = points[..., :2]
    eyes = torch.stack((xy[:, LEFT_EYE_CORNER], xy[:, RIGHT_EYE_CORNER]), dim=1)  # no index uploaded
    delta = eyes[:, 1] - eyes[:, 0]
    axis = delta / delta.norm(dim=1, keepdim=True).clamp_min(1e-6)  # [N, 2] along the eye line
    rotation = torch.stack((axis, torch.stack((-axis[:, 1], axis[:, 0]), 1)), 1)  # rows: the two axes
    local = xy @ rotation.transpose(1, 2)  # coordinates along / across the eye line
    low, high = local.amin(dim=1), local.amax(dim=1)
    centre = (((low + high) / 2)[:, None, :] @ rotation)[:, 0]
    half = (high - low) / 2
    return torch.cat((centre - half, centre + half), dim=1), eyes
