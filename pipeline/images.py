"""Decoding uploaded photos (JPEG, PNG, WebP) into RGB arrays, with limits."""

from __future__ import annotations

import io

import av
import numpy as np

from pipeline.exif_orientation import jpeg_orientation, upright
from pipeline.image_size import declared_size

# Container format by magic bytes: cheap, and a clear "not an image" before any decoder runs.
_FORMATS = (
    (b"\xff\xd8\xff", "jpeg_pipe", "jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png_pipe", "png"),
)


class ImageError(ValueError):
    code = "invalid_image"


class UnsupportedImage(ImageError):
    code = "unsupported_media_type"


class UnreadableImage(ImageError):
    code = "unreadable_image"


class ImageTooLarge(ImageError):
    code = "image_too_large"


def sniff_format(data: bytes) -> tuple[str, str]:
    """(PyAV container format, short name) of a JPEG, PNG or WebP; UnsupportedImage otherwise."""
    for magic, container, name in _FORMATS:
        if data.startswith(magic):
            return container, name
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp_pipe", "webp"
    raise UnsupportedImage("the upload is not a JPEG, PNG or WebP image")


def decode_image(data: bytes, *, max_pixels: int = 40_000_000) -> tuple[np.ndarray, str]:
    """An (h, w, 3) uint8 RGB array and the format name.

    The pixel limit is checked from the header before decoding (ours, image_size.py, then
    FFmpeg's), so a small file that claims a huge canvas (a decompression bomb) costs nothing.
    """
    container_format, name = sniff_format(data)
    declared = declared_size(data, name)
    if declared is not None and declared[0] * declared[1] > max_pixels:
        raise ImageTooLarge(f"the image is {declared[0]}x{declared[1]}; at most {max_pixels:,} pixels are accepted")
    try:
        with av.open(io.BytesIO(data), format=container_format) as container:
            stream = container.streams.video[0]
            width, height = stream.codec_context.width, stream.codec_context.height
            if width * height > max_pixels:
                raise ImageTooLarge(f"the image is {width}x{height}; at most {max_pixels:,} pixels are accepted")
            frame = next(container.decode(stream))
            image = frame.to_ndarray(format="rgb24")
        if name == "jpeg":  # as the person choosing it saw it (exif_orientation.py)
            image = upright(image, jpeg_orientation(data))
    except ImageError:
        raise
    except (av.FFmpegError, StopIteration, IndexError, ValueError) as exc:
        raise UnreadableImage(f"the {name} image could not be decoded") from exc
    if image.shape[0] < 16 or image.shape[1] < 16:
        raise UnreadableImage(f"the image is {image.shape[1]}x{image.shape[0]}; at least 16x16 is needed")
    return image, name
