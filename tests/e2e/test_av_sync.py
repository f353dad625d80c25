"""A/V sync through the server: the audio a WHEP viewer plays stays within 40 ms (EBU R37's
territory) of the video it was captured with, though the video comes out of the chain late.

The clip's flashes and clicks coincide (support/av_clip.py). The same clip sent straight from
one aiortc peer to another gives the reference offset (what aiortc's own buffering does to each
kind); through the server the offset must stay within 40 ms of it, with a chain that takes 250 ms
a frame (without the audio's delay it would be about 200 ms off) and with one of 10 ms (the mesh
on a GPU: the audio's own buffering at the server would be too much there, about 100 ms off)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiortc import RTCPeerConnection

from stream.ice import refuse_outside_checks, restrict_gathering, rtc_configuration
from stream.peer_close import close_peer
from stream.receiver_tuning import tune_receiver
from support.av_clip import CaptureClock, ClickTrack, FlashTrack, SyncMeter
from support.server import loopback_settings, running_server, wait_until
from support.whep_viewer import whep_viewer
from support.whip_publisher import LOOPBACK, post_offer

MEASURE_S = 8.0
CLICKS_NEEDED = 5
SYNC_TOLERANCE_S = 0.040


async def _sender(clock: CaptureClock) -> tuple[RTCPeerConnection, str]:
    pc = RTCPeerConnection(rtc_configuration(LOOPBACK))
    pc.addTransceiver(ClickTrack(clock), direction="sendonly")
    pc.addTransceiver(FlashTrack(clock), direction="sendonly")
    refuse_outside_checks(pc, LOOPBACK)
    await restrict_gathering(pc, LOOPBACK)
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


async def _reference_offset() -> float:
    """The clip sent peer to peer, no server: what the offset is when nothing delays either kind."""
    clock = CaptureClock()
    meter = SyncMeter(clock)
    sender, _ = await _sender(clock)
    receiver = RTCPeerConnection(rtc_configuration(LOOPBACK))
    readers: list[asyncio.Task[None]] = []

    async def read(track):
        on_frame = meter.on_video if track.kind == "video" else meter.on_audio
        while True:
            frame = await track.recv()
            on_frame(frame, time.monotonic())

    receiver.on("track", lambda track: readers.append(asyncio.ensure_future(read(track))))
    try:
        refuse_outside_checks(receiver, LOOPBACK)
        await receiver.setRemoteDescription(sender.localDescription)
        for transceiver in receiver.getTransceivers():  # the video released on its marker bit, as the server does
            tune_receiver(transceiver.receiver)
        await restrict_gathering(receiver, LOOPBACK)
        await receiver.setLocalDescription(await receiver.createAnswer())
        await sender.setRemoteDescription(receiver.localDescription)
        await wait_until(lambda: len(meter.click_delays) >= CLICKS_NEEDED, timeout=MEASURE_S * 3)
        return meter.offset_s()
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await close_peer(receiver)
        await close_peer(sender)


@pytest.mark.parametrize(
    ("chain", "chain_s"),
    [("fixed-cost:250:0", 0.250), ("fixed-cost:10:1", 0.010)],
    ids=["slow chain", "fast chain"],
)
async def test_the_audio_a_viewer_plays_stays_in_sync_with_the_delayed_video(chain: str, chain_s: float):
    reference = await _reference_offset()
    settings = loopback_settings(chain)
    async with running_server(settings) as (url, app), aiohttp.ClientSession() as http:
        clock = CaptureClock()
        meter = SyncMeter(clock)
        pc, offer = await _sender(clock)
        publisher = await post_offer(http, f"{url}/whip/av", pc, offer)
        try:
            assert publisher.status == 201, publisher.body
            async with whep_viewer(http, f"{url}/whep/av", on_video=meter.on_video, on_audio=meter.on_audio) as viewer:
                assert viewer.status == 201, viewer.body
                await wait_until(lambda: len(meter.click_delays) >= 2, timeout=MEASURE_S * 3)
                meter.video_delays.clear()  # the first second: the audio's delay still settling
                meter.click_delays.clear()
                await wait_until(lambda: len(meter.click_delays) >= CLICKS_NEEDED, timeout=MEASURE_S * 3)
                offset = meter.offset_s()
        finally:
            await publisher.close()
    video_delay = sorted(meter.video_delays)[len(meter.video_delays) // 2]
    print(
        f"\nA/V offset: reference {reference * 1000:+.0f} ms, through the server {offset * 1000:+.0f} ms "
        f"(video {video_delay * 1000:.0f} ms late, {meter.flashes_seen} flash frames seen)"
    )
    assert meter.flashes_seen > 0
    assert video_delay > chain_s  # the chain's time at least: the audio had to wait for it
    assert abs(offset - reference) <= SYNC_TOLERANCE_S, (offset, reference)
