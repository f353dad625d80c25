"""A batch's frames as the models read them (float RGB, model_input.py), converted from I420 only
where something reads them.

On the CPU the whole-frame I420 -> RGB conversion was the largest single cost of a 1280x720 frame
(about 9 of 41 ms), while on most frames the models read only the faces' surroundings: the face
and palm detectors, which look at whole frames, run every 15th frame or so. So each reader first
says what it will read (`whole`, `window`), and only that is converted: `tensor` holds the frames'
pixels there and uninitialised memory elsewhere. On CUDA the batch is converted whole at once (one
cupy kernel, nothing to save) and those calls do nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from pipeline.color import i420_to_rgb, i420_window_to_rgb

Window = tuple[int, int, int, int]  # top, bottom, left, right in frame pixels


class RgbFrames:
    def __init__(self, tensor: torch.Tensor, i420: torch.Tensor | None = None) -> None:
        """Use `from_i420` or `converted`."""
        self.tensor = tensor  # [B, 3, H, W] float RGB in [0, 1]: valid where made ready
        self.height, self.width = tensor.shape[2:]
        self._i420 = i420  # None: every pixel is ready
        self._ready: list[list[Window]] = [[] for _ in range(tensor.shape[0])]

    @classmethod
    def from_i420(cls, i420: torch.Tensor, *, lazy: bool) -> RgbFrames:
        """I420 frames [B, H*3/2, W]; lazy: converted where read, else all at once."""
        if not lazy:
            return cls(i420_to_rgb(i420))
        batch, rows, width = i420.shape
        return cls(torch.empty(batch, 3, rows * 2 // 3, width, device=i420.device), i420)

    @property
    def lazy(self) -> bool:
        """Whether pixels are converted where read (else every pixel is ready: readers can skip
        working out what they read, and its host syncs on CUDA)."""
        return self._i420 is not None

    @classmethod
    def converted(cls, tensor: torch.Tensor) -> RgbFrames:
        """Frames already converted whole, [B, 3, H, W] float RGB."""
        return cls(tensor)

    def whole(self, frames: Iterable[int]) -> None:
        """Makes every pixel of these frames ready (in one conversion)."""
        self._make_ready(list(frames), (0, self.height, 0, self.width))

    def window(self, frames: Iterable[int] | None, x1: float, y1: float, x2: float, y2: float) -> None:
        """Makes the pixels a bilinear sampler reads for points in [x1, x2] x [y1, y2] (frame pixels,
        clipped to the frame) ready, in these frames (None: all). Bounds that are not finite (a
        crop from a broken mesh or detection) read nothing real: nothing is converted."""
        if not all(math.isfinite(bound) for bound in (x1, y1, x2, y2)):
            return
        top, left = max(0, math.floor(y1) - 1), max(0, math.floor(x1) - 1)
        bottom, right = min(self.height, math.ceil(y2) + 2), min(self.width, math.ceil(x2) + 2)
        if bottom <= top or right <= left:
            return
        frames = range(len(self._ready)) if frames is None else frames
        # even bounds: a window's 2x2 chroma blocks are the frame's own (I420 frames have even sides)
        window = (top - top % 2, bottom + bottom % 2, left - left % 2, right + right % 2)
        self._make_ready(frames, window)

    def _make_ready(self, frames: Iterable[int], window: Window) -> None:
        if self._i420 is None:
            return
        top, bottom, left, right = window
        missing = [frame for frame in frames if not any(_inside(window, done) for done in self._ready[frame])]
        if not missing:
            return
        rows = torch.tensor(missing, device=self._i420.device) if len(missing) < len(self._ready) else None
        source = self._i420 if rows is None else self._i420.index_select(0, rows)
        converted = i420_window_to_rgb(source, top, bottom, left, right)
        if rows is None:
            self.tensor[:, :, top:bottom, left:right] = converted
        else:
            for row, frame in enumerate(missing):
                self.tensor[frame, :, top:bottom, left:right] = converted[row]
        for frame in missing:
            self._ready[frame].append(window)


def _inside(window: Window, done: Window) -> bool:
    return done[0] <= window[0] and window[1] <= done[1] and done[2] <= window[2] and window[3] <= done[3]
