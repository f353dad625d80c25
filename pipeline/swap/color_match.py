"""Colour transfer: the warped source's per-channel mean and spread, in a luma/chroma space
(YCbCr, BT.601 full range), moved onto the target's skin statistics inside a weight mask."""

from __future__ import annotations

import torch

_RGB_TO_YCC = torch.tensor(
    [[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]]
)
# Limits on the std ratio: a face in deep shadow must not be stretched into noise.
STD_RATIO = (0.67, 1.5)


def rgb_to_ycc(rgb: torch.Tensor) -> torch.Tensor:
    """[N, 3, H, W] RGB -> Y, Cb, Cr (chroma centred on 0)."""
    return torch.einsum("ij,njhw->nihw", _RGB_TO_YCC.to(rgb.device, rgb.dtype), rgb)


def ycc_to_rgb(ycc: torch.Tensor) -> torch.Tensor:
    inverse = torch.linalg.inv(_RGB_TO_YCC.double()).to(ycc.device, ycc.dtype)
    return torch.einsum("ij,njhw->nihw", inverse, ycc)


def masked_stats(values: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted mean and std [N, C, 1, 1] of values [N, C, H, W] under weight [N, 1, H, W]."""
    total = weight.sum(dim=(2, 3), keepdim=True).clamp_min(1e-6)
    mean = (values * weight).sum(dim=(2, 3), keepdim=True) / total
    var = ((values - mean).square() * weight).sum(dim=(2, 3), keepdim=True) / total
    return mean, var.clamp_min(1e-10).sqrt()


def match_colour(source: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`source` [N, 3, H, W] RGB recoloured so that, under `weight` [N, 1, H, W], its YCbCr mean and
    std equal `target`'s. A face whose weight is empty keeps its colours."""
    src, dst = rgb_to_ycc(source), rgb_to_ycc(target)
    src_mean, src_std = masked_stats(src, weight)
    dst_mean, dst_std = masked_stats(dst, weight)
    ratio = (dst_std / src_std).clamp(*STD_RATIO)
    matched = (src - src_mean) * ratio + dst_mean
    empty = weight.sum(dim=(1, 2, 3)) < 1.0
    matched = torch.where(empty[:, None, None, None], src, matched)
    return ycc_to_rgb(matched).clamp(0.0, 1.0)
