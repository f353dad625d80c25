"""Phone photos with an EXIF orientation are analysed as the person choosing them saw them."""

import numpy as np
import pytest

from pipeline.exif_orientation import jpeg_orientation, upright
from pipeline.images import decode_image
from phone_photos import jpeg, with_exif
from photos import face_rgb

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
