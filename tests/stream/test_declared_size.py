"""Frame sizes read from encoded VP8 and H.264 frames before decoding, and the limit built on them."""

import fractions
import queue
import random

import av
import pytest
from aiortc.codecs import depayload
from aiortc.codecs.h264 import H264Encoder
from aiortc.codecs.vpx import Vp8Encoder
from aiortc.jitterbuffer import JitterFrame
from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from stream.bounded_queues import DecoderInputQueue
from stream.declared_size import DecodeSizeLimit, declared_size

VP8 = RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000)
H264 = RTCRtpCodecParameters(mimeType="video/H264", clockRate=90000)


def still(width: int, height: int, pts: int = 0, pix_fmt: str = "yuv420p") -> av.VideoFrame:
    frame = av.VideoFrame(width, height, pix_fmt)
    for plane in frame.planes:
        plane.update(bytes([plane.line_size % 200]) * plane.buffer_size)
    frame.pts, frame.time_base = pts, fractions.Fraction(1, 90000)
    return frame


def encoded(codec: RTCRtpCodecParameters, width: int, height: int, frames: int = 1) -> list[bytes]:
    """The frames as the receiver's jitter buffer hands them on: aiortc's encoders, depayloaded."""
    encoder = Vp8Encoder() if codec is VP8 else H264Encoder()
    out = []
    for index in range(frames):
        packets, _ = encoder.encode(still(width, height, pts=index * 3000), force_keyframe=index == 0)
        out.append(b"".join(depayload(codec, packet) for packet in packets))
    return out


def x264_keyframe(width: int, height: int, profile: str, pix_fmt: str = "yuv420p", **options: str) -> bytes:
    """A keyframe from libx264 itself, for the SPS variants aiortc's encoder never writes."""
    context = av.CodecContext.create("libx264", "w")
    context.width, context.height, context.pix_fmt = width, height, pix_fmt
    context.time_base = fractions.Fraction(1, 30)
    context.profile = profile
    context.options = options
    packets = context.encode(still(width, height, pix_fmt=pix_fmt)) + context.encode(None)
    return bytes(packets[0])


@pytest.mark.parametrize("width, height", [(640, 480), (683, 385), (4096, 2304)])
def test_a_vp8_keyframe_declares_its_size_and_a_delta_frame_none(width, height):
    keyframe, delta = encoded(VP8, width, height, frames=2)
    assert declared_size("VP8", keyframe) == (width, height)
    assert declared_size("VP8", delta) is None


@pytest.mark.parametrize("width, height", [(640, 480), (1280, 720)])
def test_an_h264_keyframe_from_aiortcs_encoder_declares_its_size(width, height):
    keyframe, delta = encoded(H264, width, height, frames=2)
    assert declared_size("H264", keyframe) == (width, height)
    assert declared_size("H264", delta) is None


@pytest.mark.parametrize(
    "width, height, profile, pix_fmt, options, coded",
    [
        (1920, 1080, "High", "yuv420p", {}, (1920, 1088)),  # whole macroblocks
        (1920, 1080, "High", "yuv420p", {"x264-params": "cqm=jvt"}, (1920, 1088)),  # scaling matrices
        (1280, 720, "High 4:4:4 Predictive", "yuv444p", {"x264-params": "cqm=jvt"}, (1280, 720)),  # and twelve lists
        (720, 576, "High", "yuv420p", {"x264-params": "interlaced=1"}, (720, 576)),  # field macroblocks
        (854, 480, "Main", "yuv420p", {}, (864, 480)),
    ],
)
def test_h264_sequence_parameter_sets_of_other_profiles(width, height, profile, pix_fmt, options, coded):
    assert declared_size("H264", x264_keyframe(width, height, profile, pix_fmt, **options)) == coded


def test_broken_or_foreign_data_declares_nothing_and_never_raises():
    keyframe = encoded(H264, 640, 480)[0]
    assert declared_size("H264", keyframe[:9]) is None  # the SPS cut short of its sizes
    assert declared_size("VP8", b"\x00\x00\x00\x9d\x01") is None
    assert declared_size("opus", keyframe) is None
    rng = random.Random(7)
    for _ in range(3000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        for codec in ("VP8", "H264"):
            size = declared_size(codec, data)
            assert size is None or (len(size) == 2 and min(size) >= 0)
        declared_size("H264", b"\x00\x00\x01\x67" + data)  # random bits as an SPS: no exception


def test_the_limit_refuses_an_oversized_keyframe_and_everything_after_it():
    refused = []
    limit = DecodeSizeLimit(640 * 480, lambda width, height: refused.append((width, height)))
    small, large = encoded(VP8, 640, 480, frames=2), encoded(VP8, 1280, 720, frames=2)
    assert limit((VP8, JitterFrame(small[0], 0))) and limit((VP8, JitterFrame(small[1], 3000)))
    assert not limit((VP8, JitterFrame(large[0], 6000)))
    assert not limit((VP8, JitterFrame(large[1], 9000))) and not limit((VP8, JitterFrame(small[0], 12000)))
    assert refused == [(1280, 720)], "told once"


def test_the_decoder_queue_drops_what_admit_refuses_and_still_joins():
    frames = DecoderInputQueue(10, admit=lambda item: item != "refused")
    for item in ("a", "refused", "b", None):
        frames.put(item)
    taken = [frames.get() for _ in range(3)]
    for _ in taken:
        frames.task_done()
    assert taken == ["a", "b", None]
    frames.join()  # returns: the refused item was never counted
    with pytest.raises(queue.Empty):
        frames.get_nowait()
