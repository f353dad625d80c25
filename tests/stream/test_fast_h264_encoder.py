"""FastH264Encoder: x264 ultrafast/zerolatency/baseline, decodable output."""

from __future__ import annotations

import fractions
import re

import av
import numpy as np
import pytest
from aiortc.codecs import get_decoder
from aiortc.codecs.h264 import H264Encoder, h264_depayload
from aiortc.jitterbuffer import JitterFrame
from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from stream.aiortc_internals import FastH264Encoder

H264 = RTCRtpCodecParameters(mimeType="video/H264", clockRate=90000, payloadType=102)


def make_frame(index: int, width: int = 320, height: int = 240) -> av.VideoFrame:
    y = np.arange(height, dtype=np.uint16)[:, None]
    x = np.arange(width, dtype=np.uint16)[None, :]
    rgb = np.zeros((height, width, 3), dtype=np.uint8)
    rgb[..., 0] = ((x + 3 * index) % 256).astype(np.uint8)
    rgb[..., 1] = ((y + 5 * index) % 256).astype(np.uint8)
    rgb[..., 2] = 128
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
    frame.pts = index * 3000
    frame.time_base = fractions.Fraction(1, 90000)
    return frame


def x264_options(payloads: list[bytes]) -> str:
    """x264 writes its settings as text in an SEI of the first keyframe."""
    data = b"".join(h264_depayload(p) for p in payloads)
    match = re.search(rb"options: ([ -~]+)", data)
    assert match, "no x264 SEI found"
    return match.group(1).decode()


def test_packets_decode_back_to_frames() -> None:
    encoder = FastH264Encoder()
    decoder = get_decoder(H264)
    decoded = []
    for index in range(10):
        frame = make_frame(index)
        payloads, timestamp = encoder.encode(frame, force_keyframe=index == 0)
        assert payloads and all(len(p) <= 1300 for p in payloads)
        # what the receiver does: depayload each RTP payload, join, decode
        data = b"".join(h264_depayload(p) for p in payloads)
        decoded += decoder.decode(JitterFrame(data=data, timestamp=timestamp))
    assert len(decoded) == 10
    assert (decoded[-1].width, decoded[-1].height) == (320, 240)


def test_uses_ultrafast_zerolatency_baseline() -> None:
    payloads, _ = FastH264Encoder().encode(make_frame(0), force_keyframe=True)
    options = x264_options(payloads)
    # ultrafast: diamond motion search, no subpel refinement, 1 reference
    assert "me=dia" in options and "subme=0" in options and "ref=1 " in options
    # zerolatency: no lookahead, no B-frames
    assert "sliced_threads=1" in options and "bframes=0" in options
    # baseline: CAVLC
    assert "cabac=0" in options


def test_parent_is_more_expensive_preset() -> None:
    # guards the premise: if aiortc ever switches to ultrafast, drop our class
    payloads, _ = H264Encoder().encode(make_frame(0), force_keyframe=True)
    assert "me=dia" not in x264_options(payloads)


def test_resize_and_bitrate_change_rebuild_codec() -> None:
    encoder = FastH264Encoder()
    encoder.encode(make_frame(0))
    first = encoder.codec
    encoder.encode(make_frame(1))
    assert encoder.codec is first

    encoder.encode(make_frame(2, width=640, height=480))
    assert encoder.codec is not first and encoder.codec.width == 640
    second = encoder.codec

    encoder.target_bitrate = int(encoder.target_bitrate * 1.05)  # < 10%: kept
    encoder.encode(make_frame(3, width=640, height=480))
    assert encoder.codec is second

    encoder.target_bitrate = 2_000_000
    encoder.encode(make_frame(4, width=640, height=480))
    assert encoder.codec is not second and encoder.codec.bit_rate == 2_000_000


@pytest.mark.parametrize("requested,clamped", [(10_000, 500_000), (10**9, 3_000_000)])
def test_bitrate_clamped_like_parent(requested: int, clamped: int) -> None:
    encoder = FastH264Encoder()
    encoder.target_bitrate = requested
    assert encoder.target_bitrate == clamped


def test_forced_keyframe_is_idr() -> None:
    encoder = FastH264Encoder()
    encoder.encode(make_frame(0))
    payloads, _ = encoder.encode(make_frame(1), force_keyframe=True)
    data = b"".join(h264_depayload(p) for p in payloads)
    nal_types = {nal[0] & 0x1F for nal in H264Encoder._split_bitstream(data)}
    assert 5 in nal_types  # IDR slice
