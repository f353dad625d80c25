"""Phone photos with an EXIF orientation are analysed as the person choosing them saw them."""

import numpy as np
import pytest

from pipeline.exif_orientation import MAX_STEPS, jpeg_orientation, upright
from pipeline.images import decode_image
from support.phone_photos import jpeg, with_exif
from support.photos import face_rgb

# what was stored, for each orientation, so that turning it as EXIF says gives the upright photo
STORED = {
    1: lambda up: up,
    2: lambda up: up[:, ::-1],
    3: lambda up: up[::-1, ::-1],
    4: lambda up: up[::-1],
    5: lambda up: up.transpose(1, 0, 2),
    6: lambda up: np.rot90(up, 1),
    7: lambda up: up[::-1, ::-1].transpose(1, 0, 2),
    8: lambda up: np.rot90(up, -1),
}


@pytest.mark.parametrize("orientation", range(1, 9))
def test_a_jpeg_is_decoded_upright_whatever_its_exif_orientation(orientation):
    photo = face_rgb("obama.jpg")[:400, :300]
    stored = np.ascontiguousarray(STORED[orientation](photo))
    image, name = decode_image(with_exif(jpeg(stored), orientation))
    assert name == "jpeg" and image.shape == photo.shape
    difference = np.abs(image.astype(np.int16) - photo.astype(np.int16)).mean()
    assert difference < 3, f"orientation {orientation}: {difference:.1f} grey levels from the upright photo"


@pytest.mark.parametrize("byte_order", ["MM", "II"])
def test_orientation_is_read_in_either_byte_order_after_other_tags(byte_order):
    data = with_exif(jpeg(np.zeros((16, 24, 3), np.uint8)), 6, byte_order, before=3)
    assert jpeg_orientation(data) == 6


@pytest.mark.parametrize(
    "data",
    [
        jpeg(np.zeros((16, 16, 3), np.uint8)),  # no EXIF
        with_exif(jpeg(np.zeros((16, 16, 3), np.uint8)), 9),  # not an orientation
        with_exif(jpeg(np.zeros((16, 16, 3), np.uint8)), 6)[:30],  # cut short inside the EXIF block
        b"\xff\xd8\xff\xe1\x00\x01",  # a segment length that cannot be
        b"\xff\xd8",
    ],
)
def test_a_missing_or_broken_orientation_means_as_stored(data):
    assert jpeg_orientation(data) == 1


def test_upright_turns_a_quarter_clockwise_for_6():
    image = np.arange(6).reshape(2, 3, 1)  # [[0 1 2], [3 4 5]]
    assert upright(image, 6)[:, :, 0].tolist() == [[3, 0], [4, 1], [5, 2]]
    assert upright(image, 8)[:, :, 0].tolist() == [[2, 5], [1, 4], [0, 3]]


# The EXIF 2.3 table, independent of STORED above: which side of the shown picture the stored
# picture's row 0 and column 0 are on.
ROW_0_AND_COLUMN_0 = {
    1: ("top", "left"),
    2: ("top", "right"),
    3: ("bottom", "right"),
    4: ("bottom", "left"),
    5: ("left", "top"),
    6: ("right", "top"),
    7: ("right", "bottom"),
    8: ("left", "bottom"),
}


@pytest.mark.parametrize("orientation", range(1, 9))
def test_upright_follows_the_exif_table(orientation):
    stored = np.arange(6).reshape(2, 3, 1)  # row 0: 0 1 2; column 0: 0 3
    shown = upright(stored, orientation)[:, :, 0]
    height, width = shown.shape
    on_side = {
        "top": lambda r, c: r == 0,
        "bottom": lambda r, c: r == height - 1,
        "left": lambda r, c: c == 0,
        "right": lambda r, c: c == width - 1,
    }
    row_side, column_side = ROW_0_AND_COLUMN_0[orientation]
    for value in (0, 1, 2):
        assert on_side[row_side](*np.argwhere(shown == value)[0]), f"row 0 on the {row_side}"
    for value in (0, 3):
        assert on_side[column_side](*np.argwhere(shown == value)[0]), f"column 0 on the {column_side}"


def test_exif_after_jfif_and_a_comment_is_found():
    plain = jpeg(np.zeros((16, 16, 3), np.uint8))
    app0 = b"\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    comment = b"\xff\xfe\x00\x07hello"
    exif_segment = with_exif(plain, 6)[2 : -len(plain) + 2]
    assert jpeg_orientation(plain[:2] + app0 + comment + exif_segment + plain[2:]) == 6


def test_exif_is_looked_for_only_among_the_first_segments():
    """A crafted upload of thousands of empty segments must not keep the reader busy: past
    MAX_STEPS markers the photo is taken as stored."""
    plain = jpeg(np.zeros((16, 16, 3), np.uint8))
    exif_segment = with_exif(plain, 6)[2 : -len(plain) + 2]
    empty = b"\xff\xe0\x00\x02"
    assert jpeg_orientation(plain[:2] + empty * (MAX_STEPS - 2) + exif_segment + plain[2:]) == 6
    assert jpeg_orientation(plain[:2] + empty * MAX_STEPS + exif_segment + plain[2:]) == 1
    assert jpeg_orientation(plain[:2] + b"\xff" * 1_000_000 + exif_segment + plain[2:]) == 1
