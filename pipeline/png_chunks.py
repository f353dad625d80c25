"""A PNG's chunks, checked and cut down to what the decoder needs, before it runs.

FFmpeg inflates a PNG's compressed metadata (zTXt, iCCP) into memory with no bound: a 0.5 MB
upload with one chunk of 512 MiB of compressed zeros cost a gigabyte and more. A face photo needs
none of a PNG's ancillary chunks, so the decoder is handed only the chunks that draw the picture
(IHDR, PLTE, tRNS, IDAT, IEND): whatever trick a metadata chunk holds never reaches it.

FFmpeg also inflates the pixel data (IDAT) to its end, throwing away what does not fit the
picture: 1 KB of upload is 1 MiB to inflate. So the pixel data is inflated here once, a step at a
time and kept nowhere, and data that inflates past the size the header declares is refused.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from pipeline.image_errors import UnreadableImage

SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_CHUNKS = 16_384  # encoders cut the pixel data into 8-64 KB chunks: a 10 MB photo has hundreds
_DRAWING_CHUNKS = {b"IHDR", b"PLTE", b"tRNS", b"IDAT", b"IEND"}
_INFLATE_STEP = 1 << 20
# Bit depths each colour type allows, and its samples per pixel (PNG spec, 11.2.2).
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_SAMPLES = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
# Adam7's seven passes: first column, first row, column step, row step.
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2))


def png_for_decoder(data: bytes) -> bytes:
    """The PNG with only the chunks that draw it, once every chunk's length and CRC is checked
    and its pixel data inflates to no more than its header says; UnreadableImage otherwise."""
    chunks = list(_chunks(data))
    kind, header, _ = chunks[0]
    if kind != b"IHDR":
        raise UnreadableImage(f"the png image's first chunk is {_name(kind)}, not IHDR")
    _refuse_pixel_data_past(_pixel_data_size(header), [body for kind, body, _ in chunks if kind == b"IDAT"])
    return SIGNATURE + b"".join(whole for kind, _, whole in chunks if kind in _DRAWING_CHUNKS)


def _chunks(data: bytes) -> Iterator[tuple[bytes, memoryview, memoryview]]:
    """(type, body, the whole chunk) of each chunk up to IEND, lengths and CRCs checked (bytes
    after IEND are not read)."""
    view, at = memoryview(data), len(SIGNATURE)
    for _ in range(MAX_CHUNKS):
        if at + 12 > len(data):
            raise UnreadableImage("the png image is cut off: it ends before its IEND chunk")
        length, kind = struct.unpack(">I4s", view[at : at + 8])
        if not kind.isalpha():
            raise UnreadableImage(f"the png image has a chunk of type {_name(kind)}: not a chunk type")
        end = at + 8 + length
        if end + 4 > len(data):
            raise UnreadableImage(f"the png image is cut off: its {_name(kind)} chunk says {length:,} bytes")
        body = view[at + 8 : end]
        if zlib.crc32(body, zlib.crc32(kind)) != struct.unpack(">I", view[end : end + 4])[0]:
            raise UnreadableImage(f"the png image's {_name(kind)} chunk is damaged (its CRC does not match)")
        if kind[0:1].isupper() and kind not in _DRAWING_CHUNKS:  # a critical chunk: needed to draw it
            raise UnreadableImage(f"the png image has a critical chunk {_name(kind)} that no decoder here knows")
        yield kind, body, view[at : end + 4]
        if kind == b"IEND":
            return
        at = end + 4
    raise UnreadableImage(f"the png image has more than {MAX_CHUNKS:,} chunks")


def _pixel_data_size(header: memoryview) -> int:
    """Bytes the pixel data inflates to: each row (each pass's row when interlaced) is a filter
    byte and its pixels, packed to whole bytes."""
    if len(header) != 13:
        raise UnreadableImage(f"the png image's IHDR chunk is {len(header)} bytes, not 13")
    width, height, depth, colour, compression, filtering, interlace = struct.unpack(">IIBBBBB", header)
    if not (0 < width < 1 << 31 and 0 < height < 1 << 31):
        raise UnreadableImage(f"the png image's header says {width}x{height}")
    if depth not in _DEPTHS.get(colour, ()):
        raise UnreadableImage(
            f"the png image's header has colour type {colour} with bit depth {depth}: not a valid pair"
        )
    if compression != 0 or filtering != 0 or interlace not in (0, 1):
        raise UnreadableImage(
            "the png image's header names a compression, filter or interlace method PNG does not have"
        )
    bits_per_pixel = depth * _SAMPLES[colour]
    size = 0
    for first_column, first_row, column_step, row_step in _ADAM7 if interlace else ((0, 0, 1, 1),):
        columns = max(0, -(-(width - first_column) // column_step))
        rows = max(0, -(-(height - first_row) // row_step))
        if columns and rows:  # an empty pass has no rows, not even filter bytes
            size += rows * (1 + (columns * bits_per_pixel + 7) // 8)
    return size


def _refuse_pixel_data_past(size: int, idat_bodies: list[memoryview]) -> None:
    if not idat_bodies:
        raise UnreadableImage("the png image has no pixel data (IDAT chunk)")
    inflater, inflated = zlib.decompressobj(), 0
    try:
        for pending in idat_bodies:
            while pending and not inflater.eof:
                inflated += len(inflater.decompress(pending, _INFLATE_STEP))
                if inflated > size:
                    raise UnreadableImage(
                        f"the png image's pixel data inflates past the {size:,} bytes its header declares"
                    )
                pending = inflater.unconsumed_tail
    except zlib.error as exc:
        raise UnreadableImage(f"the png image's pixel data is damaged ({exc})") from None


def _name(kind: bytes) -> str:
    return repr(kind.decode("latin-1"))
