"""OneThreadVp8Encoder: libvpx on one thread at any size, decodable output, aiortc's sender interface."""

from __future__ import annotations

import fractions

import av
import numpy as np
from aiortc.codecs import get_decoder
from aiortc.codecs.vpx import Vp8Encoder, vp8_depayload
from aiortc.jitterbuffer import JitterFrame
from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from stream.aiortc_internals import OneThreadVp8Encoder

VP8 = RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000, payloadType=96)


def make_frame(index: int, width: int, height: int) -> av.VideoFrame:
    x = np.arange(width, dtype=np.uint16)[None, :]
    y = np.arange(height, dtype=np.uint16)[:, None]
    rgb = np.zeros((height, width, 3), dtype=np.uint8)
    rgb[..., 0] = ((x + 3 * index) % 256).astype(np.uint8)
    rgb[..., 1] = ((y + 5 * index) % 256).astype(np.uint8)
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
    frame.pts = index * 3000
    frame.time_base = fractions.Fraction(1, 90000)
    return frame


def test_a_720p_session_encodes_on_one_thread_where_aiortc_would_take_two(monkeypatch):
    monkeypatch.setattr("multiprocessing.cpu_count", lambda: 16)  # the GPU box: aiortc would pick 2
    stock, ours = Vp8Encoder(), OneThreadVp8Encoder()
    stock.encode(make_frame(0, 1280, 720))
    ours.encode(make_frame(0, 1280, 720))
    assert stock.codec.thread_count == 2 and ours.codec.thread_count == 1


def test_its_packets_decode_back_to_the_frames_with_aiortcs_timestamps():
    encoder, stock, decoder = OneThreadVp8Encoder(), Vp8Encoder(), get_decoder(VP8)
    decoded = []
    for index in range(8):
        frame = make_frame(index, 320, 240)
        payloads, timestamp = encoder.encode(frame, force_keyframe=index == 0)
        assert payloads and all(len(p) <= 1300 for p in payloads)
        assert timestamp == stock.encode(make_frame(index, 320, 240))[1]  # the RTP clock as aiortc's
        data = b"".join(vp8_depayload(p) for p in payloads)
        decoded += decoder.decode(JitterFrame(data=data, timestamp=timestamp))
    assert len(decoded) == 8 and (decoded[-1].width, decoded[-1].height) == (320, 240)
    sent = make_frame(7, 320, 240).to_ndarray(format="rgb24").astype(int)
    assert np.abs(decoded[-1].to_ndarray(format="rgb24").astype(int) - sent).mean() < 12


def test_a_new_size_or_a_bitrate_moved_far_enough_makes_a_new_codec():
    encoder = OneThreadVp8Encoder()
    encoder.encode(make_frame(0, 320, 240))
    first = encoder.codec
    encoder.target_bitrate = int(encoder.target_bitrate * 1.05)  # within 10 %: kept
    encoder.encode(make_frame(1, 320, 240))
    assert encoder.codec is first
    encoder.encode(make_frame(2, 640, 480))
    assert encoder.codec is not first and encoder.codec.width == 640
    second = encoder.codec
    encoder.target_bitrate = encoder.target_bitrate * 2
    encoder.encode(make_frame(3, 640, 480))
    assert encoder.codec is not second and encoder.codec.thread_count == 1
