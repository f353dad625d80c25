"""Two real aiortc peers on 127.0.0.1 with the stream tuning applied.

The offerer plays a browser (sends a 320x240 30 fps test pattern, receives
what comes back); the answerer plays the server: it tunes its receiver and
sender and echoes the received frames back.
"""

from __future__ import annotations

import asyncio
import fractions
import re
import time

import av
import numpy as np
import pytest
from aiortc import (
    MediaStreamTrack,
    RTCPeerConnection,
    RTCRtpSender,
    RTCRtpTransceiver,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError

from stream.aiortc_internals import (
    FastH264Encoder,
    MarkerJitterBuffer,
    OneThreadVp8Encoder,
    decoder_queue,
    jitter_buffer,
    negotiated_codecs,
    sender_encoder,
    track_queue,
)
from stream.bounded_queues import DecoderInputQueue, LatestFramesQueue
from stream.encoder import tune_sender
from stream.ice import (
    IceSettings,
    allowed_remote_networks,
    restrict_gathering,
    rtc_configuration,
)
from stream.receiver_tuning import tune_receiver
from stream.sdp import add_bitrate_hints, filter_remote_candidates, parse_offer

WIDTH, HEIGHT, FPS = 320, 240, 30
VIDEO_CLOCK = 90000
SETTINGS = IceSettings(hosts=("127.0.0.1",))


class PatternTrack(MediaStreamTrack):
    """320x240 moving gradient, paced at 30 fps, pts increasing."""

    kind = "video"

    def __init__(self) -> None:
        super().__init__()
        self._count = 0
        self._start: float | None = None
        y = np.arange(HEIGHT, dtype=np.uint16)[:, None]
        x = np.arange(WIDTH, dtype=np.uint16)[None, :]
        self._base = (x + y).astype(np.uint8)

    async def recv(self) -> av.VideoFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        due = self._start + self._count / FPS
        await asyncio.sleep(max(0.0, due - time.monotonic()))

        luma = np.roll(self._base, 4 * self._count, axis=1)
        chroma = np.full((HEIGHT // 2, WIDTH), 128, dtype=np.uint8)
        frame = av.VideoFrame.from_ndarray(np.vstack([luma, chroma]), format="yuv420p")
        frame.pts = self._count * (VIDEO_CLOCK // FPS)
        frame.time_base = fractions.Fraction(1, VIDEO_CLOCK)
        self._count += 1
        return frame


class EchoTrack(MediaStreamTrack):
    """Sends back whatever the source track delivers (the server's output)."""

    kind = "video"

    def __init__(self, source: MediaStreamTrack) -> None:
        super().__init__()
        self._source = source
        self.received = 0

    async def recv(self) -> av.VideoFrame:
        frame = await self._source.recv()
        self.received += 1
        return frame


def candidate_addresses(sdp: str) -> list[str]:
    return [line.split()[4] for line in sdp.splitlines() if line.startswith("a=candidate:")]


def force_codec(transceiver: RTCRtpTransceiver, mime: str) -> None:
    capabilities = RTCRtpSender.getCapabilities("video")
    assert capabilities is not None
    transceiver.setCodecPreferences([c for c in capabilities.codecs if c.mimeType.lower() in (mime, "video/rtx")])


async def count_frames(track: MediaStreamTrack, until: float) -> list[av.VideoFrame]:
    frames: list[av.VideoFrame] = []
    while time.monotonic() < until:
        try:
            frame = await asyncio.wait_for(track.recv(), until - time.monotonic())
        except (TimeoutError, MediaStreamError):
            break
        frames.append(frame)
    return frames


async def run_pair(mime: str) -> None:
    offerer = RTCPeerConnection(rtc_configuration(SETTINGS))
    answerer = RTCPeerConnection(rtc_configuration(SETTINGS))
    source = PatternTrack()
    echo: EchoTrack | None = None
    try:
        # --- client: offer -------------------------------------------------
        client_transceiver = offerer.addTransceiver(source, direction="sendrecv")
        force_codec(client_transceiver, mime)
        await restrict_gathering(offerer, SETTINGS)
        await offerer.setLocalDescription(await offerer.createOffer())
        offer = offerer.localDescription.sdp

        # --- server: answer ------------------------------------------------
        parse_offer(offer)
        offer, dropped = filter_remote_candidates(offer, allowed_remote_networks(SETTINGS))
        assert dropped == 0
        await answerer.setRemoteDescription(RTCSessionDescription(offer, "offer"))
        (server_transceiver,) = answerer.getTransceivers()
        receiver = server_transceiver.receiver
        tune_receiver(receiver)  # before yielding to the loop
        echo = EchoTrack(receiver.track)
        answerer.addTrack(echo)
        await restrict_gathering(answerer, SETTINGS)
        await answerer.setLocalDescription(await answerer.createAnswer())
        tune_sender(server_transceiver)
        answer = add_bitrate_hints(answerer.localDescription.sdp, min_kbps=300, start_kbps=800, max_kbps=2500)

        # --- client: apply answer -------------------------------------------
        await offerer.setRemoteDescription(RTCSessionDescription(answer, "answer"))
        # the offerer's ordering: both work right after applying the answer
        tune_receiver(client_transceiver.receiver)
        tune_sender(client_transceiver)

        # only loopback candidates, on both sides
        for sdp in (offer, answer):
            addresses = candidate_addresses(sdp)
            assert addresses and set(addresses) == {"127.0.0.1"}, sdp

        # the tuned objects are in place
        assert isinstance(jitter_buffer(receiver), MarkerJitterBuffer)
        assert isinstance(decoder_queue(receiver), DecoderInputQueue)
        assert isinstance(track_queue(receiver.track), LatestFramesQueue)

        frames = await count_frames(client_transceiver.receiver.track, until=time.monotonic() + 2.5)

        # frames made it client -> server -> client at close to 30 fps
        assert echo.received >= 30, echo.received
        assert len(frames) >= 30, len(frames)
        assert (frames[-1].width, frames[-1].height) == (WIDTH, HEIGHT)
        pts = [f.pts for f in frames]
        assert pts == sorted(pts)

        # the jitter buffer still in use is ours (nothing swapped it back)
        assert isinstance(jitter_buffer(receiver), MarkerJitterBuffer)

        # the sender uses the codec that was negotiated, through our encoder for it
        assert negotiated_codecs(server_transceiver)[0].mimeType.lower() == mime
        for transceiver in (server_transceiver, client_transceiver):
            encoder = sender_encoder(transceiver.sender)
            assert isinstance(encoder, FastH264Encoder if mime == "video/h264" else OneThreadVp8Encoder)
            assert encoder.codec is not None  # it did encode frames

        # the server's answer carries the bitrate hints for the negotiated codec
        assert re.search(r"a=fmtp:\d+ .*x-google-start-bitrate=800", answer)

        # calling it again (renegotiation) leaves the running receiver alone
        buffer = jitter_buffer(receiver)
        tune_receiver(receiver)
        assert jitter_buffer(receiver) is buffer
    finally:
        source.stop()
        if echo is not None:
            echo.stop()
        await offerer.close()
        await answerer.close()


@pytest.mark.parametrize("mime", ["video/vp8", "video/h264"])
async def test_tuned_peers_exchange_video_on_loopback(mime: str) -> None:
    await asyncio.wait_for(run_pair(mime), timeout=15)
