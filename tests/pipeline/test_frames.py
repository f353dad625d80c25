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
