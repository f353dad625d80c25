"""Frames to the device and back: one copy each way per batch.

On CUDA, host staging buffers are pinned (page-locked, so copies run by DMA and can be
asynchronous), allocated once per batch shape and reused; uploads run on their own stream
and the compute stream waits for them through an event, so an upload overlaps whatever
the compute stream is still doing. On the CPU the same calls are plain tensor views.
"""

from __future__ import annotations

import numpy as np
import torch

MAX_STAGING_SHAPES = 8  # distinct batch shapes kept pinned (frame sizes x batch sizes seen lately)


class DeviceTransfer:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._cuda = device.type == "cuda"
        self._upload_stream = torch.cuda.Stream(device) if self._cuda else None
        self._staging_in: dict[tuple[int, ...], torch.Tensor] = {}
        self._staging_out: dict[tuple[int, ...], torch.Tensor] = {}

    def upload(self, images: list[np.ndarray]) -> torch.Tensor:
        """Same-shaped uint8 arrays -> one [N, ...] tensor on the device."""
        if not self._cuda:
            return torch.from_numpy(np.stack(images))
        staging = _staging(self._staging_in, (len(images), *images[0].shape))
        host = staging.numpy()
        for index, image in enumerate(images):
            host[index] = image
        compute = torch.cuda.current_stream(self.device)
        with torch.cuda.stream(self._upload_stream):
            on_device = staging.to(self.device, non_blocking=True)
            uploaded = torch.cuda.Event()
            uploaded.record(self._upload_stream)
        compute.wait_event(uploaded)
        on_device.record_stream(compute)  # its memory is in use on the compute stream from here on
        return on_device

    def download(self, tensor: torch.Tensor) -> np.ndarray:
        """A device tensor -> a new host array (the staging buffer is reused by the next batch)."""
        if not self._cuda:
            return tensor.numpy()
        staging = _staging(self._staging_out, tuple(tensor.shape), tensor.dtype)
        staging.copy_(tensor, non_blocking=True)
        torch.cuda.current_stream(self.device).synchronize()
        return staging.numpy().copy()


def _staging(buffers: dict[tuple[int, ...], torch.Tensor], shape: tuple[int, ...], dtype: torch.dtype = torch.uint8) -> torch.Tensor:
    buffer = buffers.get(shape)
    if buffer is None or buffer.dtype != dtype:
        if len(buffers) >= MAX_STAGING_SHAPES:  # bounded: drop the oldest shape
            buffers.pop(next(iter(buffers)))
        buffer = buffers[shape] = torch.empty(shape, dtype=dtype, pin_memory=True)
    return buffer
