"""Decoded frames to I420 arrays and back, odd frame sizes included."""

import fractions

import av
import numpy as np
import pytest

from pipeline.frames import frame_to_image, image_to_frame


def odd_i420_frame(width: int, height: int, seed: int = 0) -> tuple[av.VideoFrame, list[np.ndarray]]:
    """A yuv420p frame of any size with random planes, and the planes as arrays."""
    rng = np.random.default_rng(seed)
    frame = av.VideoFrame(width, height, "yuv420p")
    planes = []
    for plane, (rows, columns) in zip(frame.planes, [(height, width)] + [((height + 1) // 2, (width + 1) // 2)] * 2):
        values = rng.integers(0, 256, (rows, columns), dtype=np.uint8)
        padded = np.zeros((plane.height, plane.line_size), np.uint8)
        padded[:rows, :columns] = values
        plane.update(padded.tobytes())
        planes.append(values)
    return frame, planes


@pytest.mark.parametrize("width, height", [(641, 481), (683, 384), (640, 361), (3, 3)])
def test_an_odd_sized_frame_loses_its_last_column_or_row(width, height):
    frame, (y, u, v) = odd_i420_frame(width, height)
    image = frame_to_image(frame)
    even_w, even_h = width // 2 * 2, height // 2 * 2
    assert image.shape == (even_h * 3 // 2, even_w)
    np.testing.assert_array_equal(image[:even_h], y[:even_h, :even_w])
    chroma = image[even_h:].reshape(2, even_h // 2, even_w // 2)
    np.testing.assert_array_equal(chroma[0], u[: even_h // 2, : even_w // 2])
    np.testing.assert_array_equal(chroma[1], v[: even_h // 2, : even_w // 2])


def test_an_odd_sized_frame_of_another_format_is_converted_then_cropped():
    rgb = np.random.default_rng(1).integers(0, 256, (481, 641, 3), dtype=np.uint8)
    image = frame_to_image(av.VideoFrame.from_ndarray(rgb, format="rgb24"))
    assert image.shape == (720, 640)
    # the same luma as converting the frame whole
    whole = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
    luma = np.frombuffer(whole.planes[0], np.uint8).reshape(whole.planes[0].height, -1)[:480, :640]
    np.testing.assert_array_equal(image[:480], luma)


def test_even_frames_are_read_as_before():
    frame, (y, u, v) = odd_i420_frame(64, 48)
    image = frame_to_image(frame)
    np.testing.assert_array_equal(image, np.concatenate([y, u.reshape(12, 64), v.reshape(12, 64)]))


@pytest.mark.parametrize("width, height", [(7680, 4320), (16383, 480), (1921, 1081)])
def test_a_frame_over_the_pixel_limit_is_scaled_down_to_fit_with_its_aspect(width, height):
    frame = av.VideoFrame(width, height, "yuv420p")
    image = frame_to_image(frame, max_pixels=1920 * 1080)
    rows, columns = image.shape[0] * 2 // 3, image.shape[1]
    assert rows % 2 == 0 and columns % 2 == 0 and image.shape[0] == rows * 3 // 2
    assert rows * columns <= 1920 * 1080
    assert rows * columns > 0.99 * 1920 * 1080, "as large as fits"
    assert columns / rows == pytest.approx(width / height, rel=0.02)


@pytest.mark.parametrize("width, height", [(16383, 3), (5, 16383)])
def test_a_sliver_stays_within_the_limit(width, height):
    image = frame_to_image(av.VideoFrame(width, height, "yuv420p"), max_pixels=4096)
    rows, columns = image.shape[0] * 2 // 3, image.shape[1]
    assert min(rows, columns) == 2 and rows * columns <= 4096


def test_the_scaled_frame_shows_the_same_picture():
    """Scaling keeps where things are: a bright square at the frame's centre stays there."""
    luma = np.full((2160, 3840), 16, np.uint8)
    luma[980:1180, 1820:2020] = 235
    image = np.concatenate([luma, np.full((1080, 3840), 128, np.uint8)])
    scaled = frame_to_image(av.VideoFrame.from_ndarray(image, format="yuv420p"), max_pixels=1920 * 1080)
    rows, columns = np.nonzero(scaled[:1080] > 128)
    assert scaled.shape == (1620, 1920)
    assert abs(rows.mean() - 540) < 1 and abs(columns.mean() - 960) < 1
    assert 95 <= rows.max() - rows.min() + 1 <= 105


def test_frames_within_the_limit_are_not_scaled():
    frame, (y, _, _) = odd_i420_frame(1920, 1080)
    np.testing.assert_array_equal(frame_to_image(frame, max_pixels=1920 * 1080)[:1080], y)


def test_a_frame_one_pixel_wide_is_refused_clearly():
    with pytest.raises(ValueError, match="1x5 frame is too small"):
        frame_to_image(av.VideoFrame(1, 5, "yuv420p"))


def test_image_to_frame_keeps_timing_and_refuses_non_i420():
    like = av.VideoFrame(64, 48, "yuv420p")
    like.pts, like.time_base = 1234, fractions.Fraction(1, 90000)
    frame = image_to_frame(np.zeros((72, 64), np.uint8), like)
    assert (frame.width, frame.height, frame.pts, frame.time_base) == (64, 48, 1234, like.time_base)
    with pytest.raises(ValueError, match="not I420"):
        image_to_frame(np.zeros((48, 64, 3), np.uint8), like)
