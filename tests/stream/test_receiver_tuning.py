"""tune_receiver on real RTCRtpReceiver objects (no network needed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiortc import RTCCertificate, RTCDtlsTransport, RTCIceGatherer, RTCIceTransport
from aiortc.jitterbuffer import JitterBuffer
from aiortc.rtcrtpparameters import RTCRtpCodecParameters, RTCRtpReceiveParameters
from aiortc.rtcrtpreceiver import RemoteStreamTrack, RTCRtpReceiver

from stream.bounded_queues import DecoderInputQueue, LatestFramesQueue
from stream.jitter import MarkerJitterBuffer
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

    jitter_buffer = receiver._RTCRtpReceiver__jitter_buffer
    assert isinstance(jitter_buffer, MarkerJitterBuffer)
    assert jitter_buffer.capacity == 512 and jitter_buffer._is_video

    decoder_queue = receiver._RTCRtpReceiver__decoder_queue
    assert isinstance(decoder_queue, DecoderInputQueue)
    assert decoder_queue.max_frames == 7
    # overflow raises the very event aiortc turns into a PLI
    assert decoder_queue.overflow_event is receiver._RTCRtpReceiver__decoder_error

    track_queue = receiver.track._queue
    assert isinstance(track_queue, LatestFramesQueue)
    assert track_queue.max_frames == 3


async def test_audio_receiver_untouched(dtls: RTCDtlsTransport) -> None:
    receiver = make_receiver("audio", dtls)
    before = receiver._RTCRtpReceiver__jitter_buffer
    tune_receiver(receiver)
    assert receiver._RTCRtpReceiver__jitter_buffer is before
    assert type(receiver.track._queue) is not LatestFramesQueue


async def test_receiver_without_track_gets_buffers_only(
    dtls: RTCDtlsTransport,
) -> None:
    receiver = RTCRtpReceiver("video", dtls)
    tune_receiver(receiver)
    assert isinstance(receiver._RTCRtpReceiver__jitter_buffer, MarkerJitterBuffer)


async def test_started_receiver_hands_the_new_queues_to_the_decoder(
    dtls: RTCDtlsTransport,
) -> None:
    receiver = make_receiver("video", dtls)
    tune_receiver(receiver)
    await receiver.receive(RTCRtpReceiveParameters(codecs=[VP8]))
    # receive() starts aiortc's decoder thread with the queues the receiver holds then:
    # (loop, input queue, output queue, error event) must be ours
    _, input_queue, output_queue, _ = receiver._RTCRtpReceiver__decoder_thread._args
    assert isinstance(input_queue, DecoderInputQueue) and input_queue is receiver._RTCRtpReceiver__decoder_queue
    assert isinstance(output_queue, LatestFramesQueue) and output_queue is receiver.track._queue
    # and they carry stop()'s None through the thread
    await receiver.stop()
    assert receiver.track._queue.get_nowait() is None


async def test_too_late_on_an_untuned_started_receiver(
    dtls: RTCDtlsTransport,
) -> None:
    receiver = make_receiver("video", dtls)
    await receiver.receive(RTCRtpReceiveParameters(codecs=[VP8]))
    try:
        with pytest.raises(RuntimeError, match="before the receiver starts"):
            tune_receiver(receiver)
        assert type(receiver._RTCRtpReceiver__jitter_buffer) is JitterBuffer
    finally:
        await receiver.stop()


async def test_second_call_is_a_no_op(dtls: RTCDtlsTransport) -> None:
    receiver = make_receiver("video", dtls)
    tune_receiver(receiver)
    queues = (receiver._RTCRtpReceiver__decoder_queue, receiver.track._queue)
    tune_receiver(receiver)
    assert (receiver._RTCRtpReceiver__decoder_queue, receiver.track._queue) == queues
