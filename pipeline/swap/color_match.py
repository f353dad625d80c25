"""Colour transfer: the warped source's per-channel mean and spread, in a luma/chroma space
(YCbCr, BT.601 full range), moved onto the target's skin statistics inside a weight mask; its
highlights kept within the target skin's own brightness."""

from __future__ import annotations

import math

import torch

_RGB_TO_YCC = torch.tensor([[0.299, 0.587, 0.114], [-0.168736, -0.331264, 0.5], [0.5, -0.418688, -0.081312]])
_YCC_TO_RGB = torch.linalg.inv(_RGB_TO_YCC.double()).float()
# Limits on the std ratio: a face in deep shadow must not be stretched into noise.
STD_RATIO = (0.67, 1.5)
# The matched face's luma gets no brighter than this quantile of the target skin's, eased over
# the last HIGHLIGHT_KNEE below it (no flat clipped plateau with a hard edge).
HIGHLIGHT_QUANTILE = 0.995
HIGHLIGHT_KNEE = 0.05


def rgb_to_ycc(rgb: torch.Tensor) -> torch.Tensor:
    """[N, 3, H, W] RGB -> Y, Cb, Cr (chroma centred on 0)."""
    return torch.einsum("ij,njhw->nihw", _RGB_TO_YCC.to(rgb.device, rgb.dtype), rgb)


def masked_stats(values: torch.Tensor, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted mean and std [N, C, 1, 1] of values [N, C, H, W] under weight [N, 1, H, W]."""
    total = weight.sum(dim=(2, 3), keepdim=True).clamp_min(1e-6)
    mean = (values * weight).sum(dim=(2, 3), keepdim=True) / total
    var = ((values - mean).square() * weight).sum(dim=(2, 3), keepdim=True) / total
    return mean, var.clamp_min(1e-10).sqrt()


def match_colour(source: torch.Tensor, target: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`source` [N, 3, H, W] RGB recoloured so that, under `weight` [N, 1, H, W], its YCbCr mean and
    std equal `target`'s. A face whose weight is empty keeps its colours.

    The statistics are read on every second pixel of each axis (a quarter of the work; the same
    figures to a fraction of a grey level on a face), and the per-channel move in YCbCr is one 3x3
    matrix and offset per face on RGB (M^-1 diag(ratio) M, M^-1 (dst_mean - ratio src_mean)),
    applied in one batched product."""
    n, channels, height, width = source.shape
    sample = (slice(None), slice(None), slice(None, None, 2), slice(None, None, 2))
    target_ycc = rgb_to_ycc(target[sample])
    src_mean, src_std = masked_stats(rgb_to_ycc(source[sample]), weight[sample])
    dst_mean, dst_std = masked_stats(target_ycc, weight[sample])
    ratio = (dst_std / src_std).clamp(*STD_RATIO)[:, :, 0, 0]  # [N, 3]
    forward, inverse = _RGB_TO_YCC.to(source.device, source.dtype), _YCC_TO_RGB.to(source.device, source.dtype)
    matrix = inverse @ (ratio[:, :, None] * forward)  # [N, 3, 3]
    offset = inverse @ (dst_mean[:, :, 0, 0] - ratio * src_mean[:, :, 0, 0])[:, :, None]  # [N, 3, 1]
    empty = weight[sample].sum(dim=(1, 2, 3)) < 1.0
    matrix = torch.where(empty[:, None, None], torch.eye(3, device=source.device, dtype=source.dtype), matrix)
    offset = torch.where(empty[:, None, None], torch.zeros_like(offset), offset)
    moved = torch.baddbmm(offset, matrix, source.reshape(n, channels, height * width)).view(n, channels, height, width)
    moved = _no_brighter_than(moved, target_ycc[:, 0], weight[sample][:, 0])
    return moved.clamp_(0.0, 1.0)


def _no_brighter_than(moved: torch.Tensor, target_luma: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Luma above the target skin's own brightest (its HIGHLIGHT_QUANTILE) eased down to it, over
    HIGHLIGHT_KNEE: a source's highlight, stretched by the std ratio onto a brighter target, turned
    white (biden.jpg's nose tip on obama.jpg's skin: 0.994, where the target's own reaches 0.805).
    target_luma and weight [N, h, w]: the target's luma and the skin weight, sampled as the
    statistics are."""
    skin = (weight > 0.5).flatten(1)
    luma = target_luma.flatten(1)
    # the quantile as the k-th brightest skin sample (a partial sort: a fraction of a full one's time)
    count = skin.sum(dim=1)
    ranks = min(luma.shape[1], math.ceil((1 - HIGHLIGHT_QUANTILE) * luma.shape[1]) + 1)
    brightest = torch.where(skin, luma, torch.full_like(luma, -1.0)).topk(ranks, dim=1).values
    rank = ((1 - HIGHLIGHT_QUANTILE) * count).long().clamp(max=brightest.shape[1] - 1)
    ceiling = brightest.gather(1, rank[:, None])[:, 0]
    ceiling = torch.where(count >= 16, ceiling, torch.full_like(ceiling, 2.0))  # no skin: no ceiling
    knee = (ceiling - HIGHLIGHT_KNEE).to(moved.dtype)[:, None, None, None]
    luma_weights = _RGB_TO_YCC[0].to(moved.device, moved.dtype)
    over = (torch.einsum("c,nchw->nhw", luma_weights, moved)[:, None] - knee).clamp_min_(0.0)  # luma past the knee
    eased = torch.tanh(over / HIGHLIGHT_KNEE).mul_(HIGHLIGHT_KNEE)
    return moved.add_(eased.sub_(over))  # the same on R, G and B: luma alone moves
