"""Affine crops with grid_sample, without two CPU costs of the obvious way.

`F.affine_grid` builds its grid as a batched matrix product over every output pixel (0.6 ms
for one 192x192 crop on a CPU thread); the grid of an affine map is separable, two broadcast
products. And `grid_sample` needs one input per crop: gathering each face's frame with
`index_select` copied a whole frame per face (0.6 ms at 640x480), where in the usual batch,
one face per frame and in frame order, the frames themselves are that input.
"""

from __future__ import annotations

import torch


def affine_grid(theta: torch.Tensor, size: int) -> torch.Tensor:
    """F.affine_grid(theta, [N, C, size, size], align_corners=False) for theta [N, 2, 3]:
    [N, size, size, 2]."""
    axis = (torch.arange(size, device=theta.device, dtype=theta.dtype) * 2 + 1) / size - 1  # pixel centres in [-1, 1]
    columns = theta[:, None, None, :, 0] * axis[None, None, :, None]  # [N, 1, S, 2]: x's share
    rows = theta[:, None, None, :, 1] * axis[None, :, None, None] + theta[:, None, None, :, 2]  # [N, S, 1, 2]
    return columns + rows


def frames_per_crop(frames: torch.Tensor, frame_index: torch.Tensor) -> torch.Tensor:
    """frames [B, ...] as grid_sample's input for crops of these frames (frame_index [N]): the
    frames themselves where crop i is of frame i for every i, else the frames gathered. The
    check reads frame_index on the host, so it is made only where that costs no device sync."""
    index = frame_index.to(frames.device, torch.long)
    if index.device.type == "cpu" and len(index) == len(frames) and torch.equal(index, torch.arange(len(frames))):
        return frames
    return frames.index_select(0, index)
