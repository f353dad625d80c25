"""RetinaFace prior boxes and the decoding of the network's offsets against them."""

from __future__ import annotations

import math

import torch

# (stride, anchor sizes in pixels) per pyramid level, finest first: the order of the network's output.
LEVELS: tuple[tuple[int, tuple[int, ...]], ...] = ((8, (16, 32)), (16, (64, 128)), (32, (256, 512)))
CENTER_VARIANCE = 0.1
SIZE_VARIANCE = 0.2


def prior_boxes(height: int, width: int, *, device: torch.device | None = None) -> torch.Tensor:
    """[A, 4] (cx, cy, w, h) in input pixels; per level row-major over ceil(H/s) x ceil(W/s) cells,
    each cell's sizes in order (the order of the network's flattened heads)."""
    per_level = []
    for stride, sizes in LEVELS:
        rows, cols = math.ceil(height / stride), math.ceil(width / stride)
        y = (torch.arange(rows, dtype=torch.float32, device=device) + 0.5) * stride
        x = (torch.arange(cols, dtype=torch.float32, device=device) + 0.5) * stride
        cy, cx = torch.meshgrid(y, x, indexing="ij")
        centers = torch.stack([cx, cy], dim=-1).reshape(-1, 1, 2).expand(-1, len(sizes), 2)
        wh = torch.tensor(sizes, dtype=torch.float32, device=device).reshape(1, -1, 1).expand(rows * cols, -1, 2)
        per_level.append(torch.cat([centers, wh], dim=-1).reshape(-1, 4))
    return torch.cat(per_level)


def decode_boxes(loc: torch.Tensor, priors: torch.Tensor) -> torch.Tensor:
    """[..., A, 4] offsets against [..., A, 4] priors (broadcast) -> [..., A, 4] (x1, y1, x2, y2)
    in the priors' pixels."""
    centers = priors[..., :2] + loc[..., :2] * CENTER_VARIANCE * priors[..., 2:]
    half = priors[..., 2:] * torch.exp(loc[..., 2:] * SIZE_VARIANCE) / 2
    return torch.cat([centers - half, centers + half], dim=-1)


def decode_points(offsets: torch.Tensor, priors: torch.Tensor) -> torch.Tensor:
    """[..., A, 10] offsets against [..., A, 4] priors (broadcast) -> [..., A, 5, 2] (x, y) in the
    priors' pixels."""
    points = offsets.unflatten(-1, (5, 2))
    return priors[..., None, :2] + points * CENTER_VARIANCE * priors[..., None, 2:]
