"""A number written into a frame's pixels, readable after a lossy codec round trip.

Benchmarks and tests stamp each frame they send with (tag, index) to measure
end-to-end latency, check order, and tell sessions' frames apart. Bits are
16x16 blocks along the top edge of the luma plane; two guard blocks (white,
black) come first, so an inverted frame is recognised too.
"""

from __future__ import annotations

import av
import numpy as np

BLOCK = 16
BITS = 24  # 8-bit tag + 16-bit frame index
WIDTH_NEEDED = BLOCK * (BITS + 2)
HIGH, LOW = 235, 16


def stamp_value(tag: int, index: int) -> int:
    return ((tag & 0xFF) << 16) | (index & 0xFFFF)


def split_value(value: int) -> tuple[int, int]:
    return value >> 16, value & 0xFFFF


def write_stamp(luma: np.ndarray, value: int) -> None:
    """Writes into a (h, w) luma plane in place (w >= WIDTH_NEEDED)."""
    levels = [HIGH, LOW] + [HIGH if value >> (BITS - 1 - bit) & 1 else LOW for bit in range(BITS)]
    for position, level in enumerate(levels):
        luma[:BLOCK, position * BLOCK : (position + 1) * BLOCK] = level


def read_stamp(frame: av.VideoFrame) -> tuple[int, bool] | None:
    """(value, inverted) from a stamped frame, or None if no stamp is there."""
    if frame.width < WIDTH_NEEDED or frame.height < BLOCK:
        return None
    luma = frame.to_ndarray(format="gray")
    inner = luma[4 : BLOCK - 4, :WIDTH_NEEDED].reshape(BLOCK - 8, BITS + 2, BLOCK)[:, :, 4 : BLOCK - 4]
    bright = inner.mean(axis=(0, 2)) > (HIGH + LOW) / 2
    if bright[0] and not bright[1]:
        inverted = False
    elif bright[1] and not bright[0]:
        inverted, bright = True, ~bright
    else:
        return None
    value = 0
    for bit in bright[2:]:
        value = value << 1 | int(bit)
    return value, inverted
