"""The chain interface: what the scheduler runs on a batch of frames.

Images are I420 (yuv420p) arrays as PyAV lays them out: shape (h * 3 // 2, w),
the Y plane on top, then U and V. That is what decoders hand us, so a chain that
converts colour does it on the device, once per batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class ChainItem:
    """One session's frame in a batch."""

    session_id: str
    image: np.ndarray
    options: Mapping[str, object] = field(default_factory=dict)
    # The frame's media time in seconds (its pts), what the chain's smoothing measures time by, so
    # a frame that waited longer for its batch is not taken as one that moved further. None: the
    # time the chain sees it.
    time: float | None = None


# Per item: the processed image; None when the chain passed the frame through on purpose
# (no face to swap: not processed, not charged, not an error); or the exception that
# failed just that frame.
ChainResult = np.ndarray | BaseException | None


class Chain(Protocol):
    name: str
    # The largest batch the device's free memory holds, measured at warm-up (memory_batch_cap.py);
    # None: no cap.
    memory_batch_cap: int | None

    def warm_up(self, max_batch: int = 1) -> None:
        """Run once before sessions are accepted (loads weights, compiles kernels), for batches of
        up to max_batch frames."""

    def stage(self, batch: Sequence[ChainItem]) -> object:
        """Starts a batch on its way to the device; returns what `run_staged` needs.

        The runner calls this on its staging thread while the previous batch computes, so
        the upload of batch k+1 overlaps the compute of batch k. It must not use the models.
        """

    def run_staged(self, staged: object) -> list[ChainResult]:
        """Processes a staged batch; returns one result per item, in order.

        Returning an item's own `image` object unchanged means "not modified":
        the caller then reuses the decoded frame without converting it back.
        Raising fails the whole batch (each frame passes through unprocessed).
        """

    def run(self, batch: Sequence[ChainItem]) -> list[ChainResult]:
        """`stage` then `run_staged`, for callers outside the runner."""

    def forget_session(self, session_id: str) -> None:
        """Drop any per-session state (tracking, cached faces) when a session ends."""


class UnstagedChain:
    """For chains with nothing to move ahead of time: staging keeps the batch as it is."""

    memory_batch_cap: int | None = None  # nothing measured: no cap

    def stage(self, batch: Sequence[ChainItem]) -> object:
        return list(batch)

    def run_staged(self, staged: object) -> list[ChainResult]:
        return self.run(staged)  # type: ignore[attr-defined, arg-type]
