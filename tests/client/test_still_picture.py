"""A still picture fitted into a video frame keeps its aspect and all of itself."""

import av
import numpy as np
import pytest

from client.still_picture import fitted_i420, top_at_aspect
from support.photos import face_rgb


def rgb_of(i420: np.ndarray) -> np.ndarray:
    return av.VideoFrame.from_ndarray(i420, format="yuv420p").to_ndarray(format="rgb24")


def picture_extent(rgb: np.ndarray) -> tuple[int, int, int, int]:
    """top, bottom, left, right of what is not the black surround"""
    rows, cols = np.nonzero(rgb.max(axis=2) > 40)
    return rows.min(), rows.max() + 1, cols.min(), cols.max() + 1


@pytest.mark.parametrize("width, height", [(640, 480), (320, 240), (1280, 720), (480, 640)])
def test_a_white_portrait_fills_the_height_centred_with_its_aspect(width, height):
    portrait = np.full((1200, 626, 3), 255, np.uint8)  # obama2.jpg's size
    frame = fitted_i420(portrait, width, height)
    assert frame.shape == (height * 3 // 2, width)
    top, bottom, left, right = picture_extent(rgb_of(frame))
    fitted_h, fitted_w = bottom - top, right - left
    expected_w = 626 / 1200 * min(height, width * 1200 / 626)
    assert abs(fitted_w - expected_w) <= 2, f"{fitted_w} px wide, not {expected_w:.1f}: stretched"
    assert abs(left - (width - right)) <= 2, "centred left to right"
    assert abs(top - (height - bottom)) <= 2, "centred top to bottom"
    assert fitted_h == height or fitted_w == width, "as large as fits"


def test_a_photo_keeps_its_content_and_its_shape():
    """The fitted frame, cut back to the picture and scaled up, is the photo (to video precision):
    nothing cut off; and the picture inside has the photo's aspect: nothing squashed."""
    photo = face_rgb("obama2.jpg")
    fitted = rgb_of(fitted_i420(photo, 640, 480))
    top, bottom, left, right = picture_extent(fitted)
    aspect, photo_aspect = (right - left) / (bottom - top), photo.shape[1] / photo.shape[0]
    assert abs(aspect - photo_aspect) < 0.02, f"aspect {aspect:.3f}, the photo's {photo_aspect:.3f}"
    inside = np.ascontiguousarray(fitted[top:bottom, left:right])
    inside_frame = av.VideoFrame.from_ndarray(inside, format="rgb24")
    back = inside_frame.reformat(photo.shape[1], photo.shape[0]).to_ndarray(format="rgb24")
    difference = np.abs(back.astype(int) - photo.astype(int)).mean()
    print(f"mean difference {difference:.1f} grey levels")
    assert difference < 12, "the picture inside is the photo, not cut or squashed"


@pytest.mark.parametrize("width, height", [(641, 480), (640, 0), (-2, 480)])
def test_a_size_that_yuv420p_cannot_hold_is_refused(width, height):
    with pytest.raises(ValueError, match="positive even size"):
        fitted_i420(np.zeros((10, 10, 3), np.uint8), width, height)


@pytest.mark.parametrize("shape", [(0, 10, 3), (10, 0, 3), (10, 10)])
def test_an_empty_or_shapeless_picture_is_refused(shape):
    for make in (lambda p: fitted_i420(p, 640, 480), lambda p: top_at_aspect(p, 640, 480)):
        with pytest.raises(ValueError, match="a picture is an"):
            make(np.zeros(shape, np.uint8))


@pytest.mark.parametrize(
    "shape, width, height",
    [((5, 1, 3), 1280, 480), ((1, 5, 3), 480, 1280), ((1, 3, 3), 2, 6), ((1, 5000, 3), 640, 480)],
)
def test_a_sliver_of_a_picture_still_frames_and_fits(shape, width, height):
    framed = top_at_aspect(np.full(shape, 200, np.uint8), width, height)
    assert framed.shape[0] >= 1 and framed.shape[1] >= 1
    assert fitted_i420(framed, width, height).shape == (height * 3 // 2, width)


@pytest.mark.parametrize(
    "shape, expected", [((1137, 910), (682, 910)), ((512, 512), (384, 512)), ((480, 1280), (480, 640))]
)
def test_a_webcam_framing_keeps_a_portraits_top_or_a_landscapes_middle(shape, expected):
    picture = np.zeros((*shape, 3), np.uint8)  # each pixel tells its row and column
    picture[..., 0] = (np.arange(shape[0]) % 256)[:, None]
    picture[..., 1] = (np.arange(shape[1]) % 256)[None, :]
    framed = top_at_aspect(picture, 640, 480)
    assert framed.shape[:2] == expected
    left = (shape[1] - expected[1]) // 2
    assert (framed == picture[: expected[0], left : left + expected[1]]).all(), "a cut, not a rescale"
