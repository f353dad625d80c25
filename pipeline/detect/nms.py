"""Greedy non-maximum suppression over a batch of images at once, in plain torch."""

from __future__ import annotations

import torch


def box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[..., K, 4] x [..., M, 4] (x1, y1, x2, y2) -> [..., K, M] intersection over union."""
    area_a = (a[..., 2] - a[..., 0]).clamp(min=0) * (a[..., 3] - a[..., 1]).clamp(min=0)
    area_b = (b[..., 2] - b[..., 0]).clamp(min=0) * (b[..., 3] - b[..., 1]).clamp(min=0)
    top_left = torch.maximum(a[..., :, None, :2], b[..., None, :, :2])
    bottom_right = torch.minimum(a[..., :, None, 2:], b[..., None, :, 2:])
    wh = (bottom_right - top_left).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[..., :, None] + area_b[..., None, :] - inter
    return inter / union.clamp(min=torch.finfo(union.dtype).tiny)


def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, valid: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Which boxes greedy NMS keeps, for each image of a batch separately.

    boxes [N, K, 4], scores [N, K], valid [N, K] (padding and below-threshold entries are False and
    neither kept nor suppressing). Returns a bool mask [N, K] aligned with the inputs: the result of
    visiting boxes by falling score (ties: lower index first) and keeping a box unless its IoU with
    an already kept box exceeds `iou_threshold`.

    The greedy result is the one fixed point of "kept = valid and not overlapped by a kept
    better-scored box"; iterating that map from "all valid kept" reaches it after as many steps as
    the longest chain of suppressions (a few for faces), each a handful of batched tensor ops.
    """
    n, k = scores.shape
    if k == 0:
        return valid.clone()
    order = torch.sort(scores.masked_fill(~valid, float("-inf")), dim=1, descending=True, stable=True).indices
    sorted_boxes = torch.gather(boxes, 1, order[..., None].expand(n, k, 4))
    sorted_valid = torch.gather(valid, 1, order)
    earlier = torch.ones(k, k, dtype=torch.bool, device=boxes.device).triu(diagonal=1)
    # overlaps[b, i, j]: box i (better ranked) would suppress box j.
    overlaps = (box_iou(sorted_boxes, sorted_boxes) > iou_threshold) & earlier
    overlaps &= sorted_valid[:, :, None] & sorted_valid[:, None, :]
    keep = sorted_valid
    for _ in range(k):
        suppressed = (overlaps & keep[:, :, None]).any(dim=1)
        updated = sorted_valid & ~suppressed
        if torch.equal(updated, keep):
            break
        keep = updated
    return torch.zeros_like(valid).scatter(1, order, keep)
