"""The size an uploaded image declares in its header, read before any decoder runs.

FFmpeg refuses canvases beyond its own limit (about 2^28 pixels) with a decode error, so a
decompression bomb would read as "unreadable" rather than "too large"; and one that FFmpeg does
open must not be decoded. Only the few header fields are read: PNG's IHDR, a JPEG's first
start-of-frame segment, WebP's VP8X, VP8 or VP8L header.
"""

from __future__ import annotations

import struct

MAX_JPEG_SEGMENTS = 64  # the start of frame comes after a few segments (APPn, DQT, ...)
_JPEG_START_OF_FRAME = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def declared_size(data: bytes, format_name: str) -> tuple[int, int] | None:
    """(width, height) from the header of a 'png', 'jpeg' or 'webp'; None when it cannot be read."""
    if format_name == "png":
        if len(data) >= 24 and data[12:16] == b"IHDR":
            width, height = struct.unpack(">II", data[16:24])
            return width, height
        return None
    if format_name == "jpeg":
        return _jpeg_size(data)
    if format_name == "webp":
        return _webp_size(data)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    at = 2  # after SOI
    for _ in range(MAX_JPEG_SEGMENTS):
        if at + 4 > len(data) or data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        (length,) = struct.unpack(">H", data[at + 2 : at + 4])
        if marker in _JPEG_START_OF_FRAME:
            if at + 9 > len(data):
                return None
            height, width = struct.unpack(">HH", data[at + 5 : at + 9])
            return width, height
        at += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None
