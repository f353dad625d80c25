"""Device colour conversion against PyAV's (swscale) conversion of real photos."""

import av
import numpy as np
import pytest
import torch

from pipeline.color import i420_to_rgb, i420_window_to_rgb, rgb_to_i420
from support.photos import face_rgb


def photo_frame(name: str, width: int = 320, height: int = 240) -> av.VideoFrame:
    return av.VideoFrame.from_ndarray(face_rgb(name), format="rgb24").reformat(width, height, format="yuv420p")


@pytest.mark.parametrize("name", ["obama.jpg", "biden.jpg"])
def test_i420_to_rgb_matches_pyav(name):
    frame = photo_frame(name)
    ours = i420_to_rgb(torch.from_numpy(frame.to_ndarray())[None])[0]
    ours = (ours * 255).round().permute(1, 2, 0).numpy()
    theirs = frame.to_ndarray(format="rgb24").astype(np.float32)
    error = np.abs(ours - theirs)
    assert error.mean() < 2.0, f"mean error {error.mean():.2f}"
    assert np.percentile(error, 99) < 12  # chroma upsampling differs slightly at edges


def test_rgb_to_i420_matches_pyav():
    rgb = (
        av.VideoFrame.from_ndarray(face_rgb("obama.jpg"), format="rgb24").reformat(320, 240).to_ndarray(format="rgb24")
    )
    ours = rgb_to_i420(torch.from_numpy(rgb).permute(2, 0, 1)[None].float() / 255)[0].numpy().astype(np.int16)
    theirs = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p").to_ndarray().astype(np.int16)
    assert ours.shape == theirs.shape == (360, 320)
    assert np.abs(ours[:240] - theirs[:240]).max() <= 2, "luma"
    assert np.abs(ours[240:] - theirs[240:]).mean() < 1.5, "chroma"


def test_round_trip_keeps_the_picture_and_batches():
    frames = [photo_frame(name).to_ndarray() for name in ("obama.jpg", "biden.jpg", "obama2.jpg")]
    batch = torch.from_numpy(np.stack(frames))
    back = rgb_to_i420(i420_to_rgb(batch)).numpy().astype(np.int16)
    assert np.abs(back - batch.numpy()).mean() < 1.5
    single = rgb_to_i420(i420_to_rgb(batch[1:2])).numpy()
    assert np.array_equal(single[0], back[1].astype(np.uint8)), "a batch equals its frames one by one"


@pytest.mark.parametrize(
    "window",
    [(0, 240, 0, 320), (100, 202, 36, 250), (0, 2, 0, 2), (238, 240, 318, 320), (218, 240, 280, 320), (2, 4, 6, 10)],
)
def test_a_window_converts_to_the_whole_frames_values_there(window):
    """Its chroma upsampling reads the rows and columns beyond the window, as the whole frame's does;
    a window of a few pixels may round its last bit differently (the matrix product's short tail)."""
    batch = torch.from_numpy(np.stack([photo_frame(n).to_ndarray() for n in ("obama.jpg", "biden.jpg")]))
    top, bottom, left, right = window
    whole = i420_to_rgb(batch)[:, :, top:bottom, left:right]
    part = i420_window_to_rgb(batch, *window)
    assert part.shape == whole.shape
    assert float((part - whole).abs().max()) <= 1e-6
    if (bottom - top) * (right - left) >= 64 * 64:
        assert torch.equal(part, whole)


@pytest.mark.parametrize("window", [(1, 10, 0, 10), (0, 10, 0, 11), (0, 242, 0, 10), (10, 10, 0, 10), (-2, 10, 0, 10)])
def test_a_window_that_is_odd_or_outside_the_frame_is_refused(window):
    batch = torch.from_numpy(photo_frame("obama.jpg").to_ndarray())[None]
    with pytest.raises(ValueError, match="even and inside 240x320"):
        i420_window_to_rgb(batch, *window)


@pytest.mark.gpu
def test_cuda_matches_cpu():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    batch = torch.from_numpy(np.stack([photo_frame("obama.jpg").to_ndarray()] * 4))
    cpu = i420_to_rgb(batch)
    cuda = i420_to_rgb(batch.cuda()).cpu()
    assert torch.allclose(cpu, cuda, atol=1e-5)
    # back to bytes: the device's float arithmetic may round a value at .5 the other way
    # (seen on an H200 with the cupy kernels), never more than one level
    back_cpu, back_cuda = rgb_to_i420(cpu).int(), rgb_to_i420(cuda.cuda()).cpu().int()
    assert int((back_cpu - back_cuda).abs().max()) <= 1
    assert float((back_cpu == back_cuda).float().mean()) > 0.99


@pytest.mark.gpu
def test_cupy_kernels_match_the_torch_formulas():
    from pipeline import cuda_color

    if not cuda_color.available():
        pytest.skip("needs CUDA and cupy (the gpu extra)")
    import pipeline.color as color

    batch = torch.from_numpy(np.stack([photo_frame(n).to_ndarray() for n in ("obama.jpg", "biden.jpg")])).cuda()
    kernel_rgb = cuda_color.i420_to_rgb(batch)
    torch_rgb = color.i420_to_rgb(batch.cpu())
    assert (kernel_rgb.cpu() - torch_rgb).abs().max() < 2 / 255
    kernel_i420 = cuda_color.rgb_to_i420(kernel_rgb)
    torch_i420 = color.rgb_to_i420(torch_rgb)
    assert (kernel_i420.cpu().int() - torch_i420.int()).abs().max() <= 1
