"""The size an uploaded image declares in its header, read before any decoder runs.

FFmpeg refuses canvases beyond its own limit (about 2^28 pixels) with a decode error, so a
decompression bomb would read as "unreadable" rather than "too large"; and one that FFmpeg does
open must not be decoded. Only the first header is read here: PNG's IHDR, a JPEG's first
start-of-frame segment, WebP's VP8X, VP8 or VP8L header (webp_chunks.py then reads every other
size a WebP holds, png_chunks.py the rest of a PNG).
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
    chunk, payload = data[12:16], memoryview(data)[20:]
    if chunk == b"VP8X" and len(data) >= 30:
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    if chunk == b"VP8 ":
        return vp8_size(payload)
    if chunk == b"VP8L":
        return vp8l_size(payload)
    return None


def vp8_size(payload: bytes | memoryview) -> tuple[int, int] | None:
    """A VP8 key frame's size: after its 3-byte frame tag and start code, 14 bits each (the top
    two bits are an upscaling hint FFmpeg ignores)."""
    if len(payload) < 10 or payload[0] & 1 or bytes(payload[3:6]) != b"\x9d\x01\x2a":  # bit 0 set: not a key frame
        return None
    width, height = struct.unpack("<HH", payload[6:10])
    return width & 0x3FFF, height & 0x3FFF


def vp8l_size(payload: bytes | memoryview) -> tuple[int, int] | None:
    """A lossless bitstream's size: after its signature byte, 14 bits each, minus one."""
    if len(payload) < 5 or payload[0] != 0x2F:
        return None
    bits = int.from_bytes(payload[1:5], "little")
    return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
