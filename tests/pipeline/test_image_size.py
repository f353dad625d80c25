"""The size an image declares, read from its header before decoding (a decompression bomb is 413)."""

import io
import struct

import av
import numpy as np
import pytest

from pipeline.image_size import declared_size
from pipeline.images import ImageTooLarge, decode_image
from support.photos import encode_still, face_rgb


def lossless_webp(rgb: np.ndarray) -> bytes:
    """libwebp's lossless (VP8L) bitstream, the other WebP a browser may upload."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="image2pipe") as output:
        stream = output.add_stream("libwebp", options={"lossless": "1"})
        stream.height, stream.width, stream.pix_fmt = rgb.shape[0], rgb.shape[1], "bgra"
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(format="bgra")
        for packet in [*stream.encode(frame), *stream.encode()]:
            output.mux(packet)
    return buffer.getvalue()


@pytest.mark.parametrize("codec, name", [("png", "png"), ("mjpeg", "jpeg"), ("webp", "webp"), ("lossless", "webp")])
def test_real_encoders_headers_are_read(codec, name):
    photo = np.ascontiguousarray(face_rgb("obama.jpg")[:123, :98])
    data = lossless_webp(photo) if codec == "lossless" else encode_still(photo, codec)
    assert declared_size(data, name) == (98, 123)
    image, _ = decode_image(data)
    assert image.shape[:2] == (123, 98)


def png_header(width: int, height: int) -> bytes:
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + b"IHDR"
        + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        + bytes(4)
    )


def jpeg_header(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + bytes(9)
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + bytes(9)
    return b"\xff\xd8" + app0 + sof0


def webp_vp8x_header(width: int, height: int) -> bytes:
    body = (
        b"VP8X"
        + struct.pack("<I", 10)
        + bytes(4)
        + (width - 1).to_bytes(3, "little")
        + (height - 1).to_bytes(3, "little")
    )
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


@pytest.mark.parametrize("header, name", [(png_header, "png"), (jpeg_header, "jpeg"), (webp_vp8x_header, "webp")])
def test_a_small_file_declaring_a_huge_canvas_is_too_large_not_unreadable(header, name):
    """60000x60000 is beyond FFmpeg's own limit: before this check it answered 400 "could not be
    decoded" instead of 413."""
    data = header(60000, 60000) + bytes(1000)
    assert declared_size(data, name) == (60000, 60000)
    with pytest.raises(ImageTooLarge, match="60000x60000"):
        decode_image(data)
    with pytest.raises(ImageTooLarge, match="8000x6000"):  # within FFmpeg's limit, over ours
        decode_image(header(8000, 6000) + bytes(1000))


@pytest.mark.parametrize("name", ["png", "jpeg", "webp"])
def test_cut_off_or_odd_headers_read_as_unknown(name):
    whole = {"png": png_header, "jpeg": jpeg_header, "webp": webp_vp8x_header}[name](640, 480)
    seen = {declared_size(whole[:end], name) for end in range(len(whole) + 1)}
    assert seen == {None, (640, 480)}, "cut off: unknown until both sizes are in, never a wrong size"
    assert declared_size(whole[:12], name) is None
    endless = b"\xff\xd8" + b"\xff\xe1\x00\x02" * 100  # empty segments, no start of frame
    assert declared_size(endless, "jpeg") is None
