"""Paste swapped crops back into their frames: inverse warp of crop and feathered box mask,
batched over faces, `out = frame * (1 - m) + warped * m`, only inside each face's box."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from pipeline.identity.align import invert_similarity


def box_mask(size: int, feather: float, device: torch.device) -> torch.Tensor:
    """[size, size] float32 mask: a box eroded by a margin and blurred so that it falls to ~0 at
    the crop's edge. feather in [0, 1): blur amount = feather * size / 2 pixels; the erosion is
    half of it (at least 1 px) and the Gaussian's sigma a quarter (the FaceFusion box-mask shape)."""
    amount = int(size * 0.5 * feather)
    margin = max(amount // 2, 1)
    mask = torch.zeros(size, size, device=device)
    mask[margin : size - margin, margin : size - margin] = 1.0
    sigma = amount * 0.25
    if sigma <= 0:
        return mask
    radius = max(1, math.ceil(3 * sigma))
    taps = torch.arange(-radius, radius + 1, device=device, dtype=torch.float32)
    kernel = torch.exp(-0.5 * (taps / sigma) ** 2)
    kernel = kernel / kernel.sum()
    m = mask[None, None]
    m = F.conv2d(F.pad(m, (radius, radius, 0, 0)), kernel.view(1, 1, 1, -1))
    m = F.conv2d(F.pad(m, (0, 0, radius, radius)), kernel.view(1, 1, -1, 1))
    return m[0, 0]


def face_boxes(transforms: torch.Tensor, size: int, height: int, width: int) -> torch.Tensor:
    """[N, 4] integer boxes (x0, y0, x1, y1), clipped to the frame, covering each crop's image
    in the frame (`transforms` [N, 2, 3] crop pixels -> frame pixels)."""
    corners = torch.tensor([[0.0, 0.0], [size, 0.0], [0.0, size], [size, size]], device=transforms.device)
    points = corners @ transforms[:, :, :2].transpose(1, 2) + transforms[:, None, :, 2]
    low = points.amin(dim=1).floor()
    high = points.amax(dim=1).ceil()
    limit = torch.tensor([width, height], device=transforms.device, dtype=low.dtype)
    low = torch.minimum(low.clamp_min(0), limit)
    high = torch.minimum(high.clamp_min(0), limit)
    return torch.cat((low, high), dim=1).long()


@torch.inference_mode()
def paste_back(
    frames: torch.Tensor,
    swapped: torch.Tensor,
    transforms: torch.Tensor,
    frame_index: torch.Tensor,
    feather: float = 0.3,
) -> torch.Tensor:
    """Frames [B, 3, H, W] (floating point, the same value scale as `swapped`, e.g. both [0, 1])
    with each swapped crop [N, 3, S, S] pasted into frame `frame_index[n]`; transforms [N, 2, 3]
    take crop pixels to frame pixels (as `align_faces` returns them). Returns new frames.

    Each face's box (the bounding box of its crop in the frame) is sampled from the crop and the
    mask (`box_mask(S, feather)`) by the inverse transform, bilinear. Faces that overlap in one
    frame are combined by their mask weights (exact where they do not overlap). Pixels outside
    every face's box keep their values bit for bit. One host read (the largest box's size).
    """
    if frames.ndim != 4 or frames.shape[1] != 3 or not frames.dtype.is_floating_point:
        raise ValueError(f"frames must be floating [B, 3, H, W], not {list(frames.shape)} {frames.dtype}")
    count, size = swapped.shape[0], swapped.shape[-1]
    if swapped.shape != (count, 3, size, size) or transforms.shape != (count, 2, 3) or frame_index.shape != (count,):
        raise ValueError(
            f"swapped must be [N, 3, S, S], transforms [N, 2, 3] and frame_index [N], not "
            f"{list(swapped.shape)}, {list(transforms.shape)}, {list(frame_index.shape)}"
        )
    if count == 0:
        return frames.clone()
    batch, _, height, width = frames.shape
    device = frames.device
    transforms = transforms.to(device, torch.float32)
    frame_index = frame_index.to(device, torch.long)
    boxes = face_boxes(transforms, size, height, width)
    extent = boxes[:, 2:] - boxes[:, :2]
    box_w, box_h = (int(v) for v in extent.amax(dim=0).tolist())  # the one host read
    if box_w <= 0 or box_h <= 0:
        return frames.clone()

    # frame pixel centres of each face's box [N, h, w, 2], and which of them lie inside its own box
    ys = torch.arange(box_h, device=device, dtype=torch.long)
    xs = torch.arange(box_w, device=device, dtype=torch.long)
    px = boxes[:, 0, None, None] + xs[None, None, :]  # [N, 1, w]
    py = boxes[:, 1, None, None] + ys[None, :, None]  # [N, h, 1]
    inside = (px < boxes[:, 2, None, None]) & (py < boxes[:, 3, None, None])  # [N, h, w]
    centres = torch.stack(torch.broadcast_tensors(px.float() + 0.5, py.float() + 0.5), dim=-1)
    to_crop = invert_similarity(transforms)
    crop_points = torch.einsum("nhwk,nck->nhwc", centres, to_crop[:, :, :2]) + to_crop[:, None, None, :, 2]
    grid = crop_points * (2.0 / size) - 1.0  # align_corners=False: crop pixel u at 2u/S - 1

    mask = box_mask(size, feather, device).expand(count, 1, size, size)
    source = torch.cat((swapped.to(device, torch.float32), mask), dim=1)
    sampled = F.grid_sample(source, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    weight = sampled[:, 3:] * inside[:, None]  # [N, 1, h, w]
    colour = sampled[:, :3] * weight

    # scatter (weighted colour, weight) into per-frame sums; outside the boxes these stay 0
    pixel = frame_index[:, None, None] * (height * width) + py.clamp(max=height - 1) * width + px.clamp(max=width - 1)
    sums = torch.zeros(batch * height * width, 4, device=device)
    values = torch.cat((colour, weight), dim=1).permute(0, 2, 3, 1).reshape(-1, 4)
    sums.index_add_(0, pixel.expand(count, box_h, box_w).reshape(-1), values)
    sums = sums.view(batch, height, width, 4).permute(0, 3, 1, 2)
    total = sums[:, 3:]
    m = total.clamp(max=1.0)
    pasted = sums[:, :3] / total.clamp_min(1e-12)
    out = frames.float() * (1 - m) + pasted * m
    out = torch.where(total > 0, out, frames.float())  # exactly the frame where no face reaches
    return out.to(frames.dtype)
