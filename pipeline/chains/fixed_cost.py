"""A chain with a known cost per batch and per frame, for scheduler tests and benchmarks.

It sleeps (releasing the GIL, as a GPU kernel would) and returns the frames
unchanged, so latency and throughput under a given chain cost can be measured
without a model.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from pipeline.chain import ChainItem, ChainResult, UnstagedChain


class FixedCostChain(UnstagedChain):
    name = "fixed-cost"

    def __init__(self, batch_ms: float, frame_ms: float) -> None:
        if batch_ms < 0 or frame_ms < 0:
            raise ValueError("fixed-cost chain costs must be >= 0 ms")
        self.batch_ms = batch_ms
        self.frame_ms = frame_ms

    def warm_up(self, max_batch: int = 1) -> None:
        pass

    def run(self, batch: Sequence[ChainItem]) -> list[ChainResult]:
        time.sleep((self.batch_ms + self.frame_ms * len(batch)) / 1000)
        return [item.image for item in batch]

    def forget_session(self, session_id: str) -> None:
        pass
