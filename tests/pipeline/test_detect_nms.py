"""Batched greedy NMS (pipeline/detect/nms.py) against a plain one-box-at-a-time greedy loop."""

from __future__ import annotations

import torch

from pipeline.detect.nms import batched_nms, box_iou


def greedy_reference(boxes: torch.Tensor, scores: torch.Tensor, valid: torch.Tensor, threshold: float) -> torch.Tensor:
    keep = torch.zeros_like(valid)
    order = sorted((i for i in range(len(scores)) if valid[i]), key=lambda i: (-float(scores[i]), i))
    kept: list[int] = []
    for i in order:
        if all(float(box_iou(boxes[i : i + 1], boxes[j : j + 1])[0, 0]) <= threshold for j in kept):
            kept.append(i)
            keep[i] = True
    return keep


def test_iou_of_known_boxes() -> None:
    a = torch.tensor([[0.0, 0.0, 10.0, 10.0]])
    b = torch.tensor([[5.0, 0.0, 15.0, 10.0], [20.0, 20.0, 30.0, 30.0], [0.0, 0.0, 10.0, 10.0]])
    torch.testing.assert_close(box_iou(a, b), torch.tensor([[50 / 150, 0.0, 1.0]]))


def test_a_suppressed_box_does_not_suppress() -> None:
    # A overlaps B, B overlaps C, A and C are apart: greedy keeps A and C.
    boxes = torch.tensor([[[0.0, 0, 10, 10], [4, 0, 14, 10], [8, 0, 18, 10]]])
    scores = torch.tensor([[0.9, 0.8, 0.7]])
    keep = batched_nms(boxes, scores, torch.ones(1, 3, dtype=torch.bool), 0.3)
    assert keep.tolist() == [[True, False, True]]


def test_invalid_entries_neither_kept_nor_suppressing() -> None:
    boxes = torch.tensor([[[0.0, 0, 10, 10], [1, 0, 11, 10]]])
    scores = torch.tensor([[0.9, 0.8]])
    keep = batched_nms(boxes, scores, torch.tensor([[False, True]]), 0.3)
    assert keep.tolist() == [[False, True]]
    assert batched_nms(torch.zeros(2, 0, 4), torch.zeros(2, 0), torch.zeros(2, 0, dtype=torch.bool), 0.4).shape == (
        2,
        0,
    )


def test_random_batches_match_the_one_box_at_a_time_loop() -> None:
    generator = torch.Generator().manual_seed(3)
    for threshold in (0.2, 0.4, 0.7):
        corners = torch.rand(5, 60, 2, generator=generator) * 200
        sizes = 10 + torch.rand(5, 60, 2, generator=generator) * 60
        boxes = torch.cat([corners, corners + sizes], dim=-1)
        scores = torch.rand(5, 60, generator=generator)
        scores[0, :10] = 0.5  # ties: the lower index goes first
        valid = torch.rand(5, 60, generator=generator) > 0.2
        keep = batched_nms(boxes, scores, valid, threshold)
        for image in range(5):
            expected = greedy_reference(boxes[image], scores[image], valid[image], threshold)
            assert keep[image].tolist() == expected.tolist()
