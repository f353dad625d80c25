"""JPEGs as phone cameras write them: the stored pixels plus an EXIF orientation for display."""

import struct

import numpy as np

from support.photos import encode_still


def jpeg(rgb: np.ndarray) -> bytes:
    return encode_still(rgb, "mjpeg")


def with_exif(jpeg_bytes: bytes, orientation: int, byte_order: str = "MM", before: int = 0) -> bytes:
    """The JPEG with an APP1 EXIF segment whose IFD0 holds `before` other tags, then Orientation."""
    order = ">" if byte_order == "MM" else "<"
    entries = [struct.pack(order + "HHIHH", 0x010F + n, 3, 1, 7, 0) for n in range(before)]  # other SHORT tags
    entries.append(struct.pack(order + "HHIHH", 0x0112, 3, 1, orientation, 0))
    tiff = byte_order.encode() + struct.pack(order + "HI", 42, 8) + struct.pack(order + "H", len(entries))
    tiff += b"".join(entries) + struct.pack(order + "I", 0)
    app1 = b"Exif\x00\x00" + tiff
    return jpeg_bytes[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + jpeg_bytes[2:]


def sideways_phone_jpeg(upright_rgb: np.ndarray) -> bytes:
    """An upright photo as a phone held the other way stores it: turned a quarter clockwise, with
    orientation 8 (turn a quarter anticlockwise to show)."""
    return with_exif(jpeg(np.ascontiguousarray(np.rot90(upright_rgb, -1))), 8)
