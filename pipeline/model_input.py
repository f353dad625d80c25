"""Frames as the face and hand models read them: float RGB [B, 3, H, W] in [0, 1].

The chain converts each batch from I420 to that once, and every model crops or resizes from it;
a uint8 [B, H, W, 3] copy of whole frames (which each model then turned back into floats) cost a
640x480 frame two full passes. Callers holding uint8 RGB (uploaded photos, tests) pass that.
"""

from __future__ import annotations

import torch


def as_float_rgb(frames: torch.Tensor) -> torch.Tensor:
    """[B, 3, H, W] float RGB in [0, 1] (returned as is) or [B, H, W, 3] uint8 RGB -> the first."""
    frame_size(frames)  # checks the layout
    return frames.permute(0, 3, 1, 2).float().div_(255.0) if frames.dtype == torch.uint8 else frames


def to_uint8_hwc(rgb: torch.Tensor) -> torch.Tensor:
    """[B, 3, H, W] float RGB in [0, 1] -> [B, H, W, 3] uint8 RGB, for the models that take that
    (the face detector, the identity model, the learned swapper)."""
    return (rgb * 255.0).round_().to(torch.uint8).permute(0, 2, 3, 1).contiguous()


def frame_size(frames: torch.Tensor) -> tuple[int, int]:
    """(H, W) of frames in either layout; a ValueError for anything else."""
    if frames.dtype == torch.uint8 and frames.dim() == 4 and frames.shape[-1] == 3:
        return frames.shape[1], frames.shape[2]
    if frames.is_floating_point() and frames.dim() == 4 and frames.shape[1] == 3:
        return frames.shape[2], frames.shape[3]
    raise ValueError(
        f"frames must be [B, 3, H, W] float or [B, H, W, 3] uint8 RGB, got {tuple(frames.shape)} {frames.dtype}"
    )
