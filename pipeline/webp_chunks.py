"""Every image size a WebP file declares, read before decoding.

A WebP says its size more than once: the VP8X chunk's canvas, each bitstream's own header (VP8
or VP8L), each animation frame's rectangle (ANMF) and that frame's bitstream. FFmpeg allocates
what the bitstream says and only warns when the canvas disagrees, so a 46-byte file with a
100x100 canvas and a 16000x16000 VP8L bitstream cost a gigabyte. Here every size is read: one
over the pixel limit is too large, and sizes that disagree make the file malformed (libwebp
refuses those too).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from pipeline.image_errors import UnreadableImage, refuse_if_too_large
from pipeline.image_size import vp8_size, vp8l_size

MAX_CHUNKS = 4096  # a still photo has a few; only an animation has more
_BITSTREAMS = (b"VP8 ", b"VP8L")


def webp_for_decoder(data: bytes, max_pixels: int) -> bytes:
    """The RIFF part of `data` once every size in it is read and agrees; ImageTooLarge or
    UnreadableImage otherwise. Bytes after the RIFF part are not the image's and are left out."""
    (riff_size,) = struct.unpack("<I", data[4:8])
    end = 8 + riff_size
    if riff_size < 4 or end > len(data):
        raise UnreadableImage(f"the webp image is cut off: its RIFF header says {end:,} bytes, {len(data):,} arrived")
    chunks = list(_chunks(memoryview(data)[:end], 12))
    kind, payload = chunks[0] if chunks else (b"", memoryview(b""))
    if kind == b"VP8X":
        if len(payload) < 10:
            raise UnreadableImage("the webp image's VP8X chunk is cut off")
        canvas = (_u24(payload[4:7]) + 1, _u24(payload[7:10]) + 1)
        refuse_if_too_large(canvas, max_pixels)
    elif kind in _BITSTREAMS:
        canvas = _bitstream_size(kind, payload, max_pixels)
    else:
        raise UnreadableImage(f"a webp image starts with a VP8, VP8L or VP8X chunk, not {_name(kind)}")
    bitstreams = frames = 0
    for kind, payload in chunks:
        if kind in _BITSTREAMS:
            bitstreams += 1
            size = _bitstream_size(kind, payload, max_pixels)
            _refuse_mismatch(size, canvas, f"its {_name(kind)} bitstream", "its canvas")
        elif kind == b"ANMF":
            frames += 1
            _check_frame(payload, frames, canvas, max_pixels)
    if not bitstreams and not frames:
        raise UnreadableImage("the webp image has no image data (no VP8, VP8L or ANMF chunk)")
    return data[:end]


def _check_frame(payload: memoryview, number: int, canvas: tuple[int, int], max_pixels: int) -> None:
    """An animation frame: its rectangle inside the canvas, its bitstream that rectangle's size."""
    if len(payload) < 16:
        raise UnreadableImage(f"the webp image's animation frame {number} is cut off")
    x, y = 2 * _u24(payload[0:3]), 2 * _u24(payload[3:6])
    size = (_u24(payload[6:9]) + 1, _u24(payload[9:12]) + 1)
    refuse_if_too_large(size, max_pixels)
    where = f"animation frame {number} ({size[0]}x{size[1]} at {x},{y})"
    if x + size[0] > canvas[0] or y + size[1] > canvas[1]:
        raise UnreadableImage(f"the webp image's {where} lies outside its {canvas[0]}x{canvas[1]} canvas")
    bitstreams = [(kind, body) for kind, body in _chunks(payload, 16) if kind in _BITSTREAMS]
    if not bitstreams:
        raise UnreadableImage(f"the webp image's animation frame {number} has no image data")
    for kind, body in bitstreams:
        _refuse_mismatch(
            _bitstream_size(kind, body, max_pixels), size, f"the {_name(kind)} bitstream of its {where}", "the frame"
        )


def _bitstream_size(kind: bytes, payload: memoryview, max_pixels: int) -> tuple[int, int]:
    size = vp8_size(payload) if kind == b"VP8 " else vp8l_size(payload)
    if size is None:
        raise UnreadableImage(f"the webp image's {_name(kind)} bitstream has no readable header")
    refuse_if_too_large(size, max_pixels)
    return size


def _refuse_mismatch(size: tuple[int, int], expected: tuple[int, int], what: str, of: str) -> None:
    if size != expected:
        raise UnreadableImage(
            f"the webp image is malformed: {what} is {size[0]}x{size[1]} but {of} {expected[0]}x{expected[1]}"
        )


def _chunks(view: memoryview, at: int) -> Iterator[tuple[bytes, memoryview]]:
    """(type, payload) of each RIFF chunk from `at` to the end of `view`."""
    count = 0
    while at < len(view):
        count += 1
        if count > MAX_CHUNKS:
            raise UnreadableImage(f"the webp image has more than {MAX_CHUNKS:,} chunks")
        if at + 8 > len(view):
            raise UnreadableImage("the webp image is cut off inside a chunk header")
        kind, size = bytes(view[at : at + 4]), struct.unpack("<I", view[at + 4 : at + 8])[0]
        end = at + 8 + size
        if end > len(view):
            raise UnreadableImage(
                f"the webp image is cut off: its {_name(kind)} chunk says {size:,} bytes, {len(view) - at - 8:,} follow"
            )
        yield kind, view[at + 8 : end]
        at = end + (size & 1)  # chunks are padded to an even length


def _u24(field: memoryview) -> int:
    return int.from_bytes(field, "little")


def _name(kind: bytes) -> str:
    return repr(kind.decode("latin-1"))
