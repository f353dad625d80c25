"""Frames to the device and back: one copy each way per batch.

On CUDA, host staging buffers are pinned (page-locked, so copies run by DMA and can be
asynchronous), allocated once per batch shape and reused. Uploads run on their own stream
and record an event; the compute stream waits for that event only when it takes the batch
(`Upload.ready`), so the runner's staging thread can upload batch k+1 while the compute
stream still runs batch k. On the CPU the same calls are plain tensor views.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

MAX_STAGING_SHAPES = 8  # distinct batch shapes kept pinned (frame sizes x batch sizes seen lately)
# Pinned upload buffers per shape: one being copied to the device while the next batch is written
# into the other (staging runs one batch ahead of compute).
UPLOAD_BUFFERS_PER_SHAPE = 2


@dataclass
class Upload:
    """A batch on its way to the device."""

    tensor: torch.Tensor
    copied: torch.cuda.Event | None = None  # recorded on the upload stream; None on the CPU

    def ready(self) -> torch.Tensor:
        """The batch, for use on the calling thread's current stream (which waits for the copy)."""
        if self.copied is not None:
            compute = torch.cuda.current_stream(self.tensor.device)
            compute.wait_event(self.copied)
            self.tensor.record_stream(compute)  # its memory is in use on the compute stream from here on
        return self.tensor


@dataclass
class _PinnedBuffer:
    host: torch.Tensor
    copied: torch.cuda.Event | None = None  # the last copy out of it; it is rewritten only after that


class DeviceTransfer:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._cuda = device.type == "cuda"
        self._upload_stream = torch.cuda.Stream(device) if self._cuda else None
        self._staging_in: dict[tuple[int, ...], list[_PinnedBuffer]] = {}
        self._next_in: dict[tuple[int, ...], int] = {}
        self._staging_out: dict[tuple[int, ...], torch.Tensor] = {}

    def upload(self, images: list[np.ndarray]) -> Upload:
        """Same-shaped uint8 arrays -> one [N, ...] tensor on its way to the device."""
        if not self._cuda:
            return Upload(torch.from_numpy(np.stack(images)))
        buffer = self._upload_buffer((len(images), *images[0].shape))
        if buffer.copied is not None:
            buffer.copied.synchronize()  # the batch before last may still be copying out of it
        host = buffer.host.numpy()
        for index, image in enumerate(images):
            host[index] = image
        with torch.cuda.stream(self._upload_stream):
            on_device = buffer.host.to(self.device, non_blocking=True)
            copied = torch.cuda.Event()
            copied.record(self._upload_stream)
        buffer.copied = copied
        return Upload(on_device, copied)

    def download(self, tensor: torch.Tensor) -> np.ndarray:
        """A device tensor -> a new host array (the staging buffer is reused by the next batch)."""
        if not self._cuda:
            return tensor.numpy()
        staging = self._staging_out.get(tuple(tensor.shape))
        if staging is None or staging.dtype != tensor.dtype:
            _make_room(self._staging_out)
            staging = self._staging_out[tuple(tensor.shape)] = torch.empty(
                tensor.shape, dtype=tensor.dtype, pin_memory=True
            )
        staging.copy_(tensor, non_blocking=True)
        torch.cuda.current_stream(self.device).synchronize()
        return staging.numpy().copy()

    def _upload_buffer(self, shape: tuple[int, ...]) -> _PinnedBuffer:
        """The shape's pinned buffers, used in turn."""
        buffers = self._staging_in.get(shape)
        if buffers is None:
            _make_room(self._staging_in)
            buffers = self._staging_in[shape] = [
                _PinnedBuffer(torch.empty(shape, dtype=torch.uint8, pin_memory=True))
                for _ in range(UPLOAD_BUFFERS_PER_SHAPE)
            ]
            self._next_in[shape] = 0
        turn = self._next_in[shape]
        self._next_in[shape] = (turn + 1) % len(buffers)
        return buffers[turn]


def _make_room(buffers: dict) -> None:
    """Bounded: past MAX_STAGING_SHAPES shapes, the oldest shape's buffers go."""
    while len(buffers) >= MAX_STAGING_SHAPES:
        buffers.pop(next(iter(buffers)))
