"""Inverts every frame on the device: a visible, cheap transform for end-to-end checks.

A browser test cannot tell a passed-through frame from a processed one; an inverted
frame is unmistakable (its correlation with the camera frame is strongly negative).
Frames of the same size are stacked and go to the device in one copy each way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import torch

from pipeline.chain import ChainItem, ChainResult, UnstagedChain


class InvertChain(UnstagedChain):
    name = "invert"

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def warm_up(self, max_batch: int = 1) -> None:
        self.run([ChainItem("warm-up", np.zeros((48, 32), np.uint8))])

    def run(self, batch: Sequence[ChainItem]) -> list[ChainResult]:
        results: list[ChainResult] = [None] * len(batch)  # type: ignore[list-item]
        by_shape: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for index, item in enumerate(batch):
            by_shape[item.image.shape].append(index)
        for indices in by_shape.values():
            stacked = torch.from_numpy(np.stack([batch[i].image for i in indices]))
            inverted = (255 - stacked.to(self.device, non_blocking=True)).cpu().numpy()
            for offset, index in enumerate(indices):
                results[index] = inverted[offset]
        return results

    def forget_session(self, session_id: str) -> None:
        pass
