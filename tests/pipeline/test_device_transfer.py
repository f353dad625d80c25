"""Frames to the device and back, unchanged, with staging buffers reused and bounded."""

import numpy as np
import pytest
import torch

from pipeline.device_transfer import MAX_STAGING_SHAPES, DeviceTransfer


def frames(count: int, height: int = 48, width: int = 64, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (height * 3 // 2, width), dtype=np.uint8) for _ in range(count)]


def test_cpu_round_trip_is_exact():
    transfer = DeviceTransfer(torch.device("cpu"))
    images = frames(3)
    on_device = transfer.upload(images).ready()
    assert on_device.shape == (3, 72, 64) and on_device.dtype == torch.uint8
    back = transfer.download(on_device)
    assert all(np.array_equal(back[i], images[i]) for i in range(3))


@pytest.mark.gpu
def test_cuda_round_trip_reuses_bounded_pinned_buffers():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    transfer = DeviceTransfer(torch.device("cuda"))
    for seed in range(3):  # the same shape: one staging buffer each way, reused
        images = frames(4, seed=seed)
        on_device = transfer.upload(images).ready()
        assert on_device.is_cuda
        back = transfer.download(on_device + 0)
        assert all(np.array_equal(back[i], images[i]) for i in range(4))
    assert len(transfer._staging_in) == 1
    assert all(buffer.host.is_pinned() for buffer in transfer._staging_in[(4, 72, 64)])
    for batch in range(1, MAX_STAGING_SHAPES + 4):
        transfer.download(transfer.upload(frames(batch)).ready())
    assert len(transfer._staging_in) <= MAX_STAGING_SHAPES and len(transfer._staging_out) <= MAX_STAGING_SHAPES


@pytest.mark.gpu
def test_cuda_uploads_overlap_the_compute_stream():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    transfer = DeviceTransfer(torch.device("cuda"))
    compute = torch.cuda.current_stream()
    # pinned and device memory allocated before the busy kernel: an allocation may wait for the
    # device, and the copies alone are what is measured
    transfer.download(transfer.upload(frames(4, seed=9)).ready())
    torch.cuda.synchronize()
    torch.cuda._sleep(1_000_000_000)  # about half a second of a busy kernel on the compute stream
    busy = torch.cuda.Event()
    busy.record(compute)
    batches = [frames(4, seed=seed) for seed in range(3)]
    uploads = [transfer.upload(images) for images in batches]  # the third reuses the first's buffer
    for upload in uploads:
        upload.copied.synchronize()
    assert not busy.query(), "the uploads finished while the compute stream was still busy"
    for images, upload in zip(batches, uploads):
        back = transfer.download(upload.ready() + 0)  # ordered after the busy kernel and the copy
        assert all(np.array_equal(back[i], images[i]) for i in range(4))
    assert busy.query()
