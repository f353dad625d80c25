"""Decoding uploaded photos (JPEG, PNG, WebP) into RGB arrays, with limits."""

from __future__ import annotations

import av
import numpy as np

from pipeline.exif_orientation import jpeg_orientation, upright
from pipeline.image_errors import ImageError, ImageTooLarge, UnreadableImage, UnsupportedImage, refuse_if_too_large
from pipeline.image_size import declared_size
from pipeline.png_chunks import png_for_decoder
from pipeline.webp_chunks import webp_for_decoder

__all__ = [
    "ImageError",
    "ImageTooLarge",
    "UnreadableImage",
    "UnsupportedImage",
    "decode_first_frame",
    "decode_image",
    "sniff_format",
]

# Format by magic bytes (a clear "not an image" before any decoder runs) and FFmpeg's decoder for it.
_FORMATS = (
    (b"\xff\xd8\xff", "jpeg", "mjpeg"),
    (b"\x89PNG\r\n\x1a\n", "png", "png"),
)
_DECODERS = {name: decoder for _, name, decoder in _FORMATS} | {"webp": "webp"}
# FFmpeg counts a picture's rows rounded up to its buffer alignment (64 bytes at most).
_ROW_ALIGNMENT = 64


def sniff_format(data: bytes) -> str:
    """'jpeg', 'png' or 'webp'; UnsupportedImage otherwise."""
    for magic, name, _ in _FORMATS:
        if data.startswith(magic):
            return name
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    raise UnsupportedImage("the upload is not a JPEG, PNG or WebP image")


def decode_image(data: bytes, *, max_pixels: int = 40_000_000) -> tuple[np.ndarray, str]:
    """An (h, w, 3) uint8 RGB array and the format name.

    Decompression bombs cost nothing: the sizes the file declares are read before decoding
    (image_size.py; every one in a WebP, webp_chunks.py), a PNG reaches the decoder without its
    metadata chunks and only if its pixel data inflates to no more than its header says
    (png_chunks.py), and the decoder itself may not set up a larger picture than declared.
    """
    name = sniff_format(data)
    declared = declared_size(data, name)
    if declared is not None:
        refuse_if_too_large(declared, max_pixels)
    if name == "png":
        data = png_for_decoder(data)
    elif name == "webp":
        data = webp_for_decoder(data, max_pixels)
    try:
        pixel_cap = _aligned_pixels(declared) if declared is not None else max_pixels
        image = decode_first_frame(data, _DECODERS[name], pixel_cap).to_ndarray(format="rgb24")
        if name == "jpeg":  # as the person choosing it saw it (exif_orientation.py)
            image = upright(image, jpeg_orientation(data))
    except (av.FFmpegError, IndexError, ValueError) as exc:
        raise UnreadableImage(f"the {name} image could not be decoded") from exc
    if image.shape[0] < 16 or image.shape[1] < 16:
        raise UnreadableImage(f"the image is {image.shape[1]}x{image.shape[0]}; at least 16x16 is needed")
    return image, name


def decode_first_frame(data: bytes, decoder_name: str, pixel_cap: int) -> av.VideoFrame:
    """The file's first picture, from FFmpeg's decoder fed the whole file as one packet.

    The decoder is told the most pixels it may set up (`pixel_cap`, its max_pixels): FFmpeg checks every
    picture against it when the size is set and again before allocating the buffer, whichever
    header or bitstream the size came from, so a size our readers missed stops the decode with an
    error before the memory is taken, instead of being decoded and refused after. It bounds
    pictures, not a decoder's side allocations (metadata, tables): png_chunks.py keeps PNG's
    compressed metadata from the decoder; WebP's and JPEG's metadata is stored, not compressed.
    No demuxer runs: av.open's stream probing decoded the picture once more, without the limit.
    """
    decoder = av.CodecContext.create(decoder_name, "r")
    decoder.options = {"max_pixels": str(pixel_cap)}
    frames = decoder.decode(av.Packet(data)) or decoder.decode(None)
    return frames[0]


def _aligned_pixels(size: tuple[int, int]) -> int:
    """The pixels FFmpeg counts for a picture of `size`: its rows rounded up to the alignment."""
    return -(-size[0] // _ROW_ALIGNMENT) * _ROW_ALIGNMENT * size[1]
