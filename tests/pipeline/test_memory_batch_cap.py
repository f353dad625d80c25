"""The device memory guard (issue #36 item 4): the batch is capped by the free device memory, from
each batch size's peak measured at warm-up."""

import pytest
import torch

from pipeline.chains import create_chain
from pipeline.memory_batch_cap import (
    MIB,
    free_device_memory,
    measure_batch_peaks,
    memory_batch_cap,
    predicted_peak,
    safety_margin,
)

GIB = 1024 * MIB
# what a warm-up measured: 300 MiB for one frame, about 120 MiB more per frame from 4 on
PEAKS = {1: 300 * MIB, 2: 420 * MIB, 4: 680 * MIB, 8: 1160 * MIB}


def test_a_size_between_measured_ones_is_interpolated_linearly():
    assert predicted_peak(PEAKS, 3) == pytest.approx(550 * MIB)  # halfway from 420 to 680
    assert predicted_peak(PEAKS, 6) == pytest.approx(920 * MIB)  # halfway from 680 to 1160
    assert predicted_peak(PEAKS, 4) == 680 * MIB  # a measured size: as measured


def test_a_size_beyond_the_largest_measured_is_extrapolated_from_the_last_two():
    # (1160 - 680) / 4 = 120 MiB a frame from 8 on
    assert predicted_peak(PEAKS, 10) == pytest.approx(1400 * MIB)
    assert predicted_peak(PEAKS, 16) == pytest.approx(2120 * MIB)


def test_one_measured_size_or_a_shrinking_peak_counts_each_frame_at_the_measured_bytes_per_frame():
    assert predicted_peak({2: 400 * MIB}, 5) == pytest.approx(1000 * MIB)
    assert predicted_peak({2: 400 * MIB, 4: 380 * MIB}, 8) == pytest.approx(760 * MIB)  # 95 MiB a frame


def test_the_margin_is_a_tenth_of_the_device_or_256_mib():
    assert safety_margin(80 * GIB) == 8 * GIB
    assert safety_margin(1 * GIB) == 256 * MIB


def test_plentiful_memory_caps_at_the_requested_max():
    assert memory_batch_cap(PEAKS, free=60 * GIB, total=80 * GIB, max_batch=8) == 8
    assert memory_batch_cap(PEAKS, free=60 * GIB, total=80 * GIB, max_batch=12) == 12  # extrapolated, fits


def test_the_cap_is_the_largest_batch_that_fits_beside_the_margin():
    # 8 GiB device: 819.2 MiB kept free; 1.5 GiB free leaves 716.8 MiB: 4 frames (680) fit, 5 (800) do not
    assert memory_batch_cap(PEAKS, free=1536 * MIB, total=8 * GIB, max_batch=8) == 4
    # without the margin 8 would fit (1160 <= 1536): the margin is what caps it
    assert predicted_peak(PEAKS, 8) <= 1536 * MIB
    # 1 GiB device: the 256 MiB floor applies; 1 GiB free leaves 768 MiB: 4 fit, 5 (800) not
    assert memory_batch_cap(PEAKS, free=1 * GIB, total=1 * GIB, max_batch=8) == 4


def test_the_cap_stops_at_the_first_size_that_does_not_fit():
    """A noisy measurement where 2 takes more than 4: a batch of 2 would not fit, so neither does the cap 4."""
    peaks = {1: 300 * MIB, 2: 900 * MIB, 4: 700 * MIB}
    assert memory_batch_cap(peaks, free=1100 * MIB, total=2 * GIB, max_batch=4) == 1


def test_never_below_one_frame():
    assert memory_batch_cap(PEAKS, free=100 * MIB, total=80 * GIB, max_batch=8) == 1
    assert memory_batch_cap(PEAKS, free=0, total=80 * GIB, max_batch=1) == 1


def test_nothing_measured_means_no_cap():
    assert memory_batch_cap({}, free=0, total=80 * GIB, max_batch=6) == 6


def test_on_the_cpu_the_batches_run_and_nothing_is_measured():
    ran = []
    assert measure_batch_peaks(torch.device("cpu"), ran.append, [1, 2, 4]) == {}
    assert ran == [1, 2, 4]


def test_chains_without_a_measurement_have_no_cap():
    for name in ("passthrough", "invert", "mesh"):
        chain = create_chain(name, torch.device("cpu"), None)
        chain.warm_up(4)
        assert chain.memory_batch_cap is None, name


def test_the_face_chains_warm_up_caps_its_batch_by_the_peaks_it_measured(monkeypatch, caplog):
    """The CPU measures nothing: here the measurement is stood in for (the batches still run), as
    CUDA would report it: 1.5 GiB free on an 8 GiB device holds 4 frames of PEAKS, not 8."""
    import pipeline.chains.face_swap as face_swap

    ran = []

    def measured(device, run_batch, sizes):
        for size in sizes:
            run_batch(size)
            ran.append(size)
        return {size: PEAKS[size] for size in sizes}

    monkeypatch.setattr(face_swap, "measure_batch_peaks", measured)
    monkeypatch.setattr(face_swap, "free_device_memory", lambda device: (1536 * MIB, 8 * GIB))
    chain = create_chain("mesh", torch.device("cpu"), None)
    with caplog.at_level("INFO", logger="pipeline.chains.face_swap"):
        chain.warm_up(8, sizes=(1, 2))
    assert ran == [1, 2]
    # 1 and 2 measured: 120 MiB more a frame; of 716.8 MiB to spend, 4 frames take 660 MiB, 5 take 780
    assert chain.memory_batch_cap == 4
    assert "capped at 4 of max_batch 8" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="pipeline.chains.face_swap"):
        chain.warm_up(3, sizes=(1, 2))
    assert chain.memory_batch_cap == 3 and "capped" not in caplog.text  # all it asked for fits


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_the_peaks_grow_with_the_batch_and_cached_memory_counts_as_free():
    device = torch.device("cuda")
    kept = torch.zeros(64 * MIB // 4, device=device)  # in use before every batch: not a batch's

    def run_batch(size: int) -> None:
        frames = torch.ones(size, 8 * MIB // 4, device=device)  # 8 MiB a frame
        (frames * 2).sum()

    peaks = measure_batch_peaks(device, run_batch, [1, 2, 4, 8])
    assert list(peaks) == [1, 2, 4, 8]
    assert all(peaks[a] < peaks[b] for a, b in zip([1, 2, 4], [2, 4, 8])), peaks
    # the frames and their doubled copy: 16 MiB a frame, without the 64 MiB held before
    assert 16 * MIB <= peaks[1] < 64 * MIB
    assert peaks[8] == pytest.approx(8 * peaks[1], rel=0.05)
    del kept
    torch.cuda.synchronize(device)
    # the 64 MiB freed stays in torch's cache: free to torch, though mem_get_info counts it as used
    free, total = free_device_memory(device)
    reported_free, reported_total = torch.cuda.mem_get_info(device)
    assert total == reported_total
    assert free >= reported_free + 64 * MIB
