"""The A/V offset a WHEP viewer sees, against the same clip sent peer to peer (bench/whip_whep.py).

The clip is tests/support/av_clip.py's: once a second a flash and a click captured on one clock,
each video frame stamped with its index; its SyncMeter tells how late each kind arrives. Peer to
peer is the reference: what the receiving end's own buffering does to each kind with no server
between (received as the WHEP viewer receives, so the two differ only by the server).
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import numpy as np
from aiortc import RTCPeerConnection
from server_process import ServerProcess  # bench/, next to this script
from waits import wait_for

from stream.ice import refuse_outside_checks, restrict_gathering, rtc_configuration
from stream.peer_close import close_peer
from stream.receiver_tuning import tune_receiver

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.av_clip import CaptureClock, ClickTrack, FlashTrack, SyncMeter  # noqa: E402 (the tests' clip)
from support.whep_viewer import whep_viewer  # noqa: E402
from support.whip_publisher import LOOPBACK, post_offer  # noqa: E402

PEER_TO_PEER = "peer to peer"
LEGEND = [
    "- A/V offset: median click lateness - median frame lateness at the receiver (support/av_clip.py's "
    "SyncMeter, after the first two clicks); positive: the sound comes after the picture. EBU R37 allows the sound 40 ms "
    "early and 60 ms late at a broadcaster's output (-40 / +60 here). fixed-cost:10:1 stands for a fast chain (the mesh on a GPU), 250:0 for a "
    "slow one (the mesh on these CPUs); the clip is 416x240 VP8 and Opus, a plain aiortc offer.",
]


@dataclass
class AvRun:
    path: str  # PEER_TO_PEER or the server's chain
    round: int
    offset_ms: float
    video_late_ms: float
    clicks: int


async def _clip_sender(clock: CaptureClock) -> RTCPeerConnection:
    pc = RTCPeerConnection(rtc_configuration(LOOPBACK))
    pc.addTransceiver(ClickTrack(clock), direction="sendonly")
    pc.addTransceiver(FlashTrack(clock), direction="sendonly")
    refuse_outside_checks(pc, LOOPBACK)
    await restrict_gathering(pc, LOOPBACK)
    await pc.setLocalDescription(await pc.createOffer())
    return pc


async def _settled(meter: SyncMeter, clicks: int) -> None:
    """Forgets the first two clicks (the server's audio delay is still settling), then waits for `clicks` more."""
    timeout = clicks * 4.0
    if not await wait_for(lambda: len(meter.click_delays) >= 2, timeout):
        raise RuntimeError("no clicks heard: the audio did not arrive")
    meter.video_delays.clear()
    meter.click_delays.clear()
    if not await wait_for(lambda: len(meter.click_delays) >= clicks, timeout):
        raise RuntimeError(f"fewer than {clicks} clicks heard within {timeout:.0f} s")


def _run(path: str, round_number: int, meter: SyncMeter) -> AvRun:
    video_late = float(np.median(meter.video_delays)) * 1000
    return AvRun(path, round_number, meter.offset_s() * 1000, video_late, len(meter.click_delays))


async def peer_to_peer(clicks: int, round_number: int) -> AvRun:
    """The clip from one aiortc peer straight to another."""
    clock = CaptureClock()
    meter = SyncMeter(clock)
    sender = await _clip_sender(clock)
    receiver = RTCPeerConnection(rtc_configuration(LOOPBACK))
    readers: list[asyncio.Task[None]] = []

    async def read(track) -> None:
        on_frame = meter.on_video if track.kind == "video" else meter.on_audio
        while True:
            on_frame(await track.recv(), time.monotonic())

    receiver.on("track", lambda track: readers.append(asyncio.ensure_future(read(track))))
    try:
        refuse_outside_checks(receiver, LOOPBACK)
        await receiver.setRemoteDescription(sender.localDescription)
        for transceiver in receiver.getTransceivers():  # receiving as the WHEP viewer does
            tune_receiver(transceiver.receiver)
        await restrict_gathering(receiver, LOOPBACK)
        await receiver.setLocalDescription(await receiver.createAnswer())
        await sender.setRemoteDescription(receiver.localDescription)
        await _settled(meter, clicks)
        return _run(PEER_TO_PEER, round_number, meter)
    finally:
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        await close_peer(receiver)
        await close_peer(sender)


async def through_server(http: aiohttp.ClientSession, server: ServerProcess, clicks: int, round_number: int) -> AvRun:
    """The clip published over WHIP and played over WHEP."""
    clock = CaptureClock()
    meter = SyncMeter(clock)
    pc = await _clip_sender(clock)
    publisher = await post_offer(http, f"{server.url}/whip/bench-av", pc, pc.localDescription.sdp)
    try:
        if publisher.status != 201:
            raise RuntimeError(f"POST /whip answered {publisher.status}: {publisher.body[:300]}")
        url = f"{server.url}/whep/bench-av"
        async with whep_viewer(http, url, on_video=meter.on_video, on_audio=meter.on_audio) as viewer:
            if viewer.status != 201:
                raise RuntimeError(f"POST /whep answered {viewer.status}: {viewer.body[:300]}")
            await _settled(meter, clicks)
        async with http.delete(server.url + publisher.location) as response:
            await response.read()
    finally:
        await publisher.close()
    return _run(server.mode, round_number, meter)


def table(runs: list[AvRun]) -> list[str]:
    rows = [
        "| path | round | A/V offset ms (audio after video) | vs peer to peer ms | video late ms (median) | clicks |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    reference = {run.round: run.offset_ms for run in runs if run.path == PEER_TO_PEER}
    for run in sorted(runs, key=lambda run: (run.path != PEER_TO_PEER, run.path, run.round)):
        versus = "-" if run.path == PEER_TO_PEER else f"{run.offset_ms - reference[run.round]:+.0f}"
        rows.append(
            f"| {run.path} | {run.round} | {run.offset_ms:+.0f} | {versus} | {run.video_late_ms:.0f} | {run.clicks} |"
        )
    return rows
