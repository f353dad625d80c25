"""tune_receiver on real RTCRtpReceiver objects (no network needed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiortc import RTCCertificate, RTCDtlsTransport, RTCIceGatherer, RTCIceTransport
from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtcrtpparameters import RTCRtpCodecParameters, RTCRtpReceiveParameters
from aiortc.rtcrtpreceiver import RemoteStreamTrack, RTCRtpReceiver

from stream.aiortc_internals import (
    ArrivalJitterBuffer,
    MarkerJitterBuffer,
    decoder_error_event,
    decoder_queue,
    decoder_thread,
    jitter_buffer,
    track_queue,
)
from stream.bounded_queues import DecoderInputQueue, LatestFramesQueue
from stream.receiver_tuning import tune_receiver

VP8 = RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000, payloadType=96)


@pytest.fixture
async def dtls() -> AsyncIterator[RTCDtlsTransport]:
    transport = RTCDtlsTransport(
        RTCIceTransport(RTCIceGatherer(iceServers=[])),
        [RTCCertificate.generateCertificate()],
    )
    yield transport
    await transport.stop()


def make_receiver(kind: str, dtls: RTCDtlsTransport) -> RTCRtpReceiver:
    # what setRemoteDescription does for a recv direction
    receiver = RTCRtpReceiver(kind, dtls)
    receiver._track = RemoteStreamTrack(kind=kind)
    return receiver


async def test_video_receiver_objects_swapped(dtls: RTCDtlsTransport) -> None:
    receiver = make_receiver("video", dtls)
    tune_receiver(receiver, max_decoded_frames=3, max_encoded_frames=7)

    buffer = jitter_buffer(receiver)
    assert isinstance(buffer, MarkerJitterBuffer)
    assert buffer.capacity == 512 and buffer._is_video

    decoder_input = decoder_queue(receiver)
    assert isinstance(decoder_input, DecoderInputQueue)
    assert decoder_input.max_frames == 7
    # overflow raises the very event aiortc turns into a PLI
    assert decoder_input.overflow_event is decoder_error_event(receiver)

    frames = track_queue(receiver.track)
    assert isinstance(frames, LatestFramesQueue)
    assert frames.max_frames == 3


async def test_audio_receiver_gets_the_arrival_buffer_and_keeps_its_queues(dtls: RTCDtlsTransport) -> None:
    receiver = make_receiver("audio", dtls)
    frames = track_queue(receiver.track)
    tune_receiver(receiver)
    assert isinstance(jitter_buffer(receiver), ArrivalJitterBuffer)
    assert track_queue(receiver.track) is frames  # bounded to a few frames, the sound would chop
    assert not isinstance(decoder_queue(receiver), DecoderInputQueue)


async def test_receiver_without_track_gets_buffers_only(
    dtls: RTCDtlsTransport,
) -> None:
    receiver = RTCRtpReceiver("video", dtls)
    tune_receiver(receiver)
    assert isinstance(jitter_buffer(receiver), MarkerJitterBuffer)


async def test_started_receiver_hands_the_new_queues_to_the_decoder(
    dtls: RTCDtlsTransport,
) -> None:
    receiver = make_receiver("video", dtls)
    tune_receiver(receiver)
    await receiver.receive(RTCRtpReceiveParameters(codecs=[VP8]))
    # receive() starts aiortc's decoder thread with the queues the receiver holds then:
    # (loop, input queue, output queue, error event) must be ours
    _, input_queue, output_queue, _ = decoder_thread(receiver)._args
    assert isinstance(input_queue, DecoderInputQueue) and input_queue is decoder_queue(receiver)
    assert isinstance(output_queue, LatestFramesQueue) and output_queue is track_queue(receiver.track)
    # and they carry stop()'s None through the thread
    await receiver.stop()
    assert track_queue(receiver.track).get_nowait() is None


async def test_too_late_on_an_untuned_started_receiver(
    dtls: RTCDtlsTransport,
) -> None:
    receiver = make_receiver("video", dtls)
    await receiver.receive(RTCRtpReceiveParameters(codecs=[VP8]))
    try:
        with pytest.raises(RuntimeError, match="before the receiver starts"):
            tune_receiver(receiver)
        assert type(jitter_buffer(receiver)) is JitterBuffer
    finally:
        await receiver.stop()


async def test_second_call_is_a_no_op(dtls: RTCDtlsTransport) -> None:
    receiver = make_receiver("video", dtls)
    tune_receiver(receiver)
    queues = (decoder_queue(receiver), track_queue(receiver.track))
    tune_receiver(receiver)
    assert (decoder_queue(receiver), track_queue(receiver.track)) == queues
