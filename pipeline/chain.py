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


# Per item: the processed image; None when the chain passed the frame through on purpose
# (no face to swap: not processed, not charged, not an error); or the exception that
# failed just that frame.
ChainResult = np.ndarray | BaseException | None


class Chain(Protocol):
    name: str

    def warm_up(self) -> None:
        """Run once before sessions are accepted (loads weights, compiles kernels)."""

    def run(self, batch: Sequence[ChainItem]) -> list[ChainResult]:
        """Process a batch; returns one result per item, in order.

        Returning an item's own `image` object unchanged means "not modified":
        the caller then reuses the decoded frame without converting it back.
        Raising fails the whole batch (each frame passes through unprocessed).
        """

    def forget_session(self, session_id: str) -> None:
        """Drop any per-session state (tracking, cached faces) when a session ends."""

    def analyse_face(self, image_rgb: np.ndarray) -> object | None:
        """What the chain needs of an uploaded face photo, computed once; None: no face in it.

        Chains that use no source face return the image's size (anything not None)."""
