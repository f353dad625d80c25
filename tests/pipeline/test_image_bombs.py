"""Decompression bombs: an upload whose fields ask the decoder for far more than its size is
refused (or, for PNG metadata, the chunk dropped) before the decoder allocates it."""

from __future__ import annotations

import io
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np
import pytest

from pipeline.images import ImageTooLarge, UnreadableImage, decode_first_frame, decode_image
from support.image_bombs import (
    ANIMATION_FLAG,
    anim,
    anmf,
    bombs,
    iccp_chunk,
    png_chunk,
    png_chunks,
    png_whose_pixels_inflate_to,
    riff,
    vp8,
    vp8l,
    vp8x,
    with_chunks_after_ihdr,
    ztxt_chunk,
)
from support.photos import encode_still, face_rgb


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    return np.ascontiguousarray(face_rgb("obama.jpg"))


@pytest.fixture(scope="module")
def photo_png(photo) -> bytes:
    return encode_still(photo, "png")


def quickest(call: Callable[[], object], tries: int = 3) -> float:
    """The shortest of `tries` timings: a busy machine slows some runs, never all of them."""
    timings = []
    for _ in range(tries):
        started = time.perf_counter()
        try:
            call()
        except (ImageTooLarge, UnreadableImage):
            pass
        timings.append(time.perf_counter() - started)
    return min(timings)


def resident_mb(field: str) -> int:
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith(field))
    return int(line.split()[1]) // 1024


def peak_growth_mb(call: Callable[[], object]) -> int:
    """How far resident memory rose above where it was while `call` ran (the kernel's high-water
    mark, reset first)."""
    Path("/proc/self/clear_refs").write_text("5")
    before = resident_mb("VmRSS")
    try:
        call()
    except (ImageTooLarge, UnreadableImage):
        pass
    return resident_mb("VmHWM") - before


def test_each_bomb_is_refused_or_stripped_in_less_time_than_a_real_photo_takes(photo, photo_png):
    """Before: the VP8L canvas mismatch took 2 s and +978 MB, the iCCP chunk 4 s and +1.5 GB.
    The PNG bombs are the same photo with one chunk added: decoding them may cost that photo's
    decode and a walk over the added half megabyte, no more."""
    decode_image(photo_png)  # the first decode loads the codecs
    reference = quickest(lambda: decode_image(photo_png))
    for name, data in bombs(photo_png).items():
        if name.startswith("webp"):
            with pytest.raises(ImageTooLarge, match="16000x16000"):
                decode_image(data)
        elif "IDAT" in name:
            with pytest.raises(UnreadableImage, match="inflates past"):
                decode_image(data)
        else:
            image, _ = decode_image(data)
            assert np.array_equal(image, photo), name
        elapsed = quickest(lambda data=data: decode_image(data))
        assert elapsed < min(1.0, 2 * reference + 0.05), f"{name}: {elapsed:.3f} s, a real photo {reference:.3f} s"
        assert peak_growth_mb(lambda data=data: decode_image(data)) < 100, name


def test_the_decoder_itself_stops_a_picture_larger_than_declared_before_allocating_it(photo):
    """The defence that does not depend on our readers knowing every trick: handed the VP8L bomb
    with only the canvas's 100x100 declared, FFmpeg stops at the bitstream's size, sooner than it
    decodes a real photo."""
    bomb = riff(vp8x(100, 100), vp8l(16000, 16000))

    def decode() -> None:
        with pytest.raises(av.FFmpegError):
            decode_first_frame(bomb, "webp", 128 * 100)

    real = encode_still(photo, "webp")
    reference = quickest(lambda: decode_image(real))
    assert peak_growth_mb(decode) < 100  # without the limit: +978 MB
    elapsed = quickest(decode)
    assert elapsed < 2 * reference + 0.05, f"the bomb: {elapsed:.3f} s, a real photo {reference:.3f} s"


def test_real_pngs_of_every_pixel_layout_still_decode():
    """The pixel data's inflated size is checked exactly, so it is computed for every bit depth,
    colour type and Adam7 interlacing the encoder writes."""
    rgb = np.random.default_rng(7).integers(0, 256, (29, 37, 3), dtype=np.uint8)
    for pix_fmt in ("rgb24", "rgba", "rgb48be", "rgba64be", "gray", "gray8a", "gray16be", "ya16be", "monob"):
        for interlaced in (False, True):
            buffer = io.BytesIO()
            with av.open(buffer, "w", format="image2pipe") as output:
                stream = output.add_stream("png")
                stream.width, stream.height, stream.pix_fmt = 37, 29, pix_fmt
                if interlaced:  # FFmpeg's PNG encoder writes Adam7 when asked for interlacing
                    stream.codec_context.flags |= av.codec.context.Flags.interlaced_dct
                frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format=pix_fmt)
                for packet in [*stream.encode(frame), *stream.encode()]:
                    output.mux(packet)
            data = buffer.getvalue()
            assert data[28] == interlaced, "the encoder wrote what was asked"
            image, _ = decode_image(data)
            assert image.shape == (29, 37, 3), (pix_fmt, interlaced)


def palette_png(width: int, height: int, depth: int, extra_row_bytes: int = 0) -> bytes:
    row = b"\0" + bytes((width * depth + 7) // 8)  # filter type 0, every pixel palette entry 0
    pixels = row * height + bytes(extra_row_bytes)
    return (
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, 3, 0, 0, 0))
        + png_chunk(b"PLTE", b"\x10\x80\xf0" * (1 << depth))
        + png_chunk(b"IDAT", zlib.compress(pixels))
        + png_chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("depth", [1, 2, 4, 8])
def test_palette_pngs_decode_and_one_byte_past_their_size_is_refused(depth):
    image, _ = decode_image(palette_png(19, 17, depth))
    assert image.shape == (17, 19, 3) and (image == (0x10, 0x80, 0xF0)).all()
    with pytest.raises(UnreadableImage, match="inflates past"):
        decode_image(palette_png(19, 17, depth, extra_row_bytes=1))


def test_png_metadata_chunks_are_dropped_and_pixels_kept(photo, photo_png):
    with_metadata = with_chunks_after_ihdr(
        photo_png,
        ztxt_chunk(1),
        iccp_chunk(1),
        png_chunk(b"tEXt", b"Title\0a face"),
        png_chunk(b"gAMA", struct.pack(">I", 45455)),
    )
    image, _ = decode_image(with_metadata)
    assert np.array_equal(image, photo)

    from pipeline.png_chunks import png_for_decoder

    kept = [chunk[4:8] for chunk in png_chunks(png_for_decoder(with_metadata))]
    assert set(kept) == {b"IHDR", b"IDAT", b"IEND"}, kept


def corrupt(png: bytes, kind: bytes, change: Callable[[bytes], bytes]) -> bytes:
    chunks = png_chunks(png)
    at = next(index for index, chunk in enumerate(chunks) if chunk[4:8] == kind)
    chunks[at] = change(chunks[at])
    return png[:8] + b"".join(chunks)


@pytest.mark.parametrize(
    "broken, message",
    [
        (lambda png: corrupt(png, b"IDAT", lambda chunk: chunk[:-4] + bytes(4)), "CRC"),
        (lambda png: corrupt(png, b"IDAT", lambda chunk: struct.pack(">I", 1 << 30) + chunk[4:]), "cut off"),
        (lambda png: png[:-12], "IEND"),
        (lambda png: png[:8] + png_chunk(b"tEXt", b"a\0b") + png[8:], "IHDR"),
        (lambda png: with_chunks_after_ihdr(png, png_chunk(b"XYZW", b"")), "XYZW"),
        (
            lambda png: corrupt(png, b"IHDR", lambda chunk: png_chunk(b"IHDR", chunk[8:16] + b"\x08\x05\0\0\0")),
            "colour type",
        ),
    ],
    ids=["bad CRC", "length past the end", "no IEND", "IHDR not first", "unknown critical chunk", "bad colour type"],
)
def test_a_malformed_png_chunk_table_is_refused(photo_png, broken, message):
    with pytest.raises(UnreadableImage, match=message):
        decode_image(broken(photo_png))


def test_png_pixels_inflating_past_the_header_size_are_refused_before_decoding():
    """FFmpeg inflates an IDAT to its end and throws away what does not fit the picture: 1 KB
    of a 10 MB upload is a MiB to inflate, so 10 MB would be 10 GB of work."""
    with pytest.raises(UnreadableImage, match="inflates past"):
        decode_image(png_whose_pixels_inflate_to(1))


# --- WebP: every size a decoder will use --------------------------------------------------------


def still_webp(photo: np.ndarray, lossless: bool) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="image2pipe") as output:
        stream = output.add_stream("libwebp", options={"lossless": "1"} if lossless else {})
        stream.height, stream.width, stream.pix_fmt = photo.shape[0], photo.shape[1], "yuv420p"
        frame = av.VideoFrame.from_ndarray(photo, format="rgb24").reformat(format="yuv420p")
        for packet in [*stream.encode(frame), *stream.encode()]:
            output.mux(packet)
    return buffer.getvalue()


def animated_webp(width: int = 64, height: int = 48, frames: int = 3) -> bytes:
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="webp") as output:
        stream = output.add_stream("libwebp_anim", rate=10)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for shade in range(frames):
            rgb = np.full((height, width, 3), shade * 80, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")):
                output.mux(packet)
        for packet in stream.encode():
            output.mux(packet)
    return buffer.getvalue()


def test_real_webps_pass_the_checks(photo):
    from pipeline.webp_chunks import webp_for_decoder

    small = np.ascontiguousarray(photo[:123, :98])
    for lossless in (False, True):
        image, _ = decode_image(still_webp(small, lossless))
        assert image.shape == (123, 98, 3)
    animation = animated_webp()
    assert b"ANMF" in animation
    assert webp_for_decoder(animation, 40_000_000) == animation  # every frame read, all agree


CANVAS = vp8x(100, 100)
ANIMATED = vp8x(100, 100, ANIMATION_FLAG)


@pytest.mark.parametrize(
    "data, refusal, message",
    [
        (riff(CANVAS, vp8l(200, 200)), UnreadableImage, "200x200.*100x100"),
        (riff(CANVAS, vp8(200, 200)), UnreadableImage, "200x200.*100x100"),
        (riff(vp8l(100, 100), vp8l(16000, 16000)), ImageTooLarge, "16000x16000"),
        (riff(ANIMATED, anim(), anmf(0, 0, 100, 100, vp8l(16000, 16000))), ImageTooLarge, "16000x16000"),
        (
            riff(ANIMATED, anim(), anmf(0, 0, 100, 100, vp8l(100, 100)), anmf(0, 0, 50, 50, vp8(60, 50))),
            UnreadableImage,
            "frame 2",
        ),
        (riff(ANIMATED, anim(), anmf(60, 0, 50, 50, vp8l(50, 50))), UnreadableImage, "outside"),
        (riff(ANIMATED, anim(), anmf(0, 0, 50, 50)), UnreadableImage, "frame 1 has no image"),
        (riff(CANVAS), UnreadableImage, "no image"),
        (riff(CANVAS, vp8l(100, 100))[:-4], UnreadableImage, "cut off"),
    ],
    ids=[
        "canvas vs VP8L",
        "canvas vs VP8",
        "a second bitstream",
        "animation frame too large",
        "second frame vs its rectangle",
        "frame outside the canvas",
        "empty frame",
        "no bitstream",
        "cut off",
    ],
)
def test_every_size_in_a_webp_is_read_and_a_mismatch_refused(data, refusal, message):
    started = time.perf_counter()
    with pytest.raises(refusal, match=message):
        decode_image(data)
    assert time.perf_counter() - started < 1.0
