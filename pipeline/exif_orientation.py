"""The EXIF orientation of a JPEG, and the pixels turned as it says.

Phone cameras store a photo as the sensor saw it and record in EXIF how to turn it for display
(tag 0x0112: 6 is a quarter turn clockwise, the usual portrait photo); browsers show it turned, so
the person choosing it sees it upright. The decoder hands over the stored pixels: a face in a
photo taken with the phone held sideways came out on its side, which the detector and FaceMesh,
trained on upright faces, read badly or not at all.
"""

from __future__ import annotations

import numpy as np

ORIENTATION_TAG = 0x0112
_SHORT = 3  # the TIFF type the tag is stored as
# Markers and fill bytes read before giving up: cameras write the EXIF segment first or second
# (after JFIF's APP0); without a bound, a crafted 10 MB upload of empty segments or fill bytes
# kept this loop busy for seconds.
MAX_STEPS = 64


def jpeg_orientation(data: bytes) -> int:
    """The EXIF orientation (1-8) of a JPEG file's bytes; 1 (as stored) when it has none or it
    cannot be read."""
    position = 2  # after the start-of-image marker
    for _ in range(MAX_STEPS):
        if position + 4 > len(data) or data[position] != 0xFF:
            return 1
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte before a marker
            position += 1
            continue
        if marker in (0xD9, 0xDA):  # end of image, start of scan: the metadata segments are over
            return 1
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if length < 2:
            return 1
        segment = data[position + 4 : position + 2 + length]
        if marker == 0xE1 and segment.startswith(b"Exif\x00\x00"):
            return _tiff_orientation(segment[6:])
        position += 2 + length
    return 1


def _tiff_orientation(tiff: bytes) -> int:
    """Orientation from the first image directory (IFD0) of an EXIF block's TIFF structure."""
    order = {b"II": "little", b"MM": "big"}.get(tiff[:2])
    if order is None or len(tiff) < 8:
        return 1

    def number(offset: int, size: int) -> int:
        return int.from_bytes(tiff[offset : offset + size], order)  # type: ignore[arg-type]

    directory = number(4, 4)
    if directory + 2 > len(tiff):
        return 1
    for entry in range(directory + 2, directory + 2 + 12 * number(directory, 2), 12):
        if entry + 12 > len(tiff):
            return 1
        if number(entry, 2) == ORIENTATION_TAG and number(entry + 2, 2) == _SHORT:
            value = number(entry + 8, 2)
            return value if 1 <= value <= 8 else 1
    return 1


def upright(image: np.ndarray, orientation: int) -> np.ndarray:
    """An [H, W, C] image turned (and mirrored) as EXIF orientation 1-8 says it is displayed."""
    turned = {
        1: image,
        2: image[:, ::-1],  # mirrored left-right
        3: image[::-1, ::-1],  # half a turn
        4: image[::-1],  # mirrored top-bottom
        5: image.transpose(1, 0, 2),  # mirrored across the main diagonal
        6: np.rot90(image, -1),  # a quarter turn clockwise
        7: image.transpose(1, 0, 2)[::-1, ::-1],  # mirrored across the other diagonal
        8: np.rot90(image, 1),  # a quarter turn anticlockwise
    }[orientation]
    return np.ascontiguousarray(turned)
