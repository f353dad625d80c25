"""A WHIP publisher that sends an offer shaped as OBS's (plugins/obs-webrtc, OBS 30-32): Opus on
payload type 111, H.264 constrained baseline (42e01f, packetization-mode=1) on 96 with NACK, PLI,
FIR and REMB feedback, no RTX, and no ICE candidates (OBS gathers after the answer, so the server
learns its address from its connectivity checks). Built from a real aiortc offer, rewritten."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass, field

import aiohttp
import av
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack, MediaStreamError
from multidict import CIMultiDict

from stream.ice import IceSettings, refuse_outside_checks, restrict_gathering, rtc_configuration
from stream.peer_close import close_peer

LOOPBACK = IceSettings(hosts=("127.0.0.1",))
OBS_VIDEO_FEEDBACK = ("nack", "nack pli", "ccm fir", "goog-remb")
_RTPMAP = re.compile(r"^a=rtpmap:(\d+) ([^/]+)/")


@dataclass
class WhipPublisher:
    pc: RTCPeerConnection
    offer_sdp: str = ""
    status: int = 0
    headers: CIMultiDict[str] = field(default_factory=CIMultiDict)
    links: list[str] = field(default_factory=list)
    body: str = ""
    answered_in_s: float = 0.0
    frames_received: int = 0
    last_video: av.VideoFrame | None = None  # the newest frame that came back
    _reader: asyncio.Task[None] | None = None

    @property
    def location(self) -> str:
        return self.headers["Location"]

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await close_peer(self.pc)


def obs_shaped(sdp: str) -> str:
    """aiortc's offer as OBS's: Opus on 111, H.264 42e01f on 96 with OBS's feedback, no RTX, no candidates."""
    sections = [[]]  # session lines, then one list per m-section
    for line in sdp.splitlines():
        if line.startswith(("a=candidate:", "a=end-of-candidates")):
            continue
        if line.startswith("m="):
            sections.append([])
        sections[-1].append(line)
    out = list(sections[0])
    for section in sections[1:]:
        kind = section[0].split()[0][2:]
        out += (
            _renumbered(section, "opus", 111, ())
            if kind == "audio"
            else _renumbered(section, "H264", 96, OBS_VIDEO_FEEDBACK)
        )
    return "\r\n".join(out) + "\r\n"


def _renumbered(section: list[str], codec: str, payload_type: int, feedback: tuple[str, ...]) -> list[str]:
    """The section with one codec kept (the first of that name), on `payload_type`."""
    kept = next(m.group(1) for line in section if (m := _RTPMAP.match(line)) and m.group(2).lower() == codec.lower())
    out = []
    for line in section:
        if line.startswith("m="):
            words = line.split()
            line = " ".join([*words[:3], str(payload_type)])
        elif line.startswith(("a=rtpmap:", "a=fmtp:", "a=rtcp-fb:")):
            number = line.split(":", 1)[1].split()[0]
            if number != kept:
                continue
            if line.startswith("a=rtcp-fb:") and feedback:
                continue  # written below, OBS's set
            line = line.replace(f":{kept} ", f":{payload_type} ", 1)
            if line.startswith("a=rtpmap:") and feedback:
                out.append(line)
                out += [f"a=rtcp-fb:{payload_type} {kind}" for kind in feedback]
                continue
        out.append(line)
    return out


async def offer_like_obs(
    track: MediaStreamTrack, *, video_direction: str = "sendonly"
) -> tuple[RTCPeerConnection, str]:
    """A peer sending `track` and silence; its offer rewritten as OBS's (sendonly, as OBS sends).
    With video_direction 'sendrecv', the processed video comes back on the same transceiver."""
    pc = RTCPeerConnection(rtc_configuration(LOOPBACK))
    audio = pc.addTransceiver(AudioStreamTrack(), direction="sendonly")
    audio.setCodecPreferences([c for c in RTCRtpSender.getCapabilities("audio").codecs if c.mimeType == "audio/opus"])
    video = pc.addTransceiver(track, direction=video_direction)
    video.setCodecPreferences(
        [
            c
            for c in RTCRtpSender.getCapabilities("video").codecs
            if c.mimeType == "video/H264" and c.parameters.get("profile-level-id") == "42e01f"
        ]
    )
    offer = await pc.createOffer()
    refuse_outside_checks(pc, LOOPBACK)
    await restrict_gathering(pc, LOOPBACK)
    await pc.setLocalDescription(offer)
    return pc, obs_shaped(pc.localDescription.sdp)


async def post_offer(
    http: aiohttp.ClientSession, url: str, pc: RTCPeerConnection, sdp: str, **request: object
) -> WhipPublisher:
    """POSTs the offer; on 201 applies the answer and reads what comes back on the video transceiver."""
    publisher = WhipPublisher(pc, offer_sdp=sdp)
    headers = {"Content-Type": "application/sdp", **request.pop("headers", {})}  # type: ignore[dict-item]
    remote: asyncio.Future[MediaStreamTrack] = asyncio.get_running_loop().create_future()
    pc.on("track", lambda t: t.kind == "video" and not remote.done() and remote.set_result(t))
    started = time.monotonic()
    async with http.post(url, data=sdp.encode(), headers=headers, **request) as response:
        publisher.body = await response.text()
        publisher.answered_in_s = time.monotonic() - started
        publisher.status = response.status
        publisher.headers = response.headers.copy()  # case-insensitive, as HTTP's names are
        publisher.links = response.headers.getall("Link", [])
    if publisher.status == 201:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=publisher.body, type="answer"))
        publisher._reader = asyncio.ensure_future(_count_frames(remote, publisher))
    return publisher


async def _count_frames(remote: asyncio.Future[MediaStreamTrack], publisher: WhipPublisher) -> None:
    track = await remote
    with contextlib.suppress(MediaStreamError):
        while True:
            publisher.last_video = await track.recv()
            publisher.frames_received += 1
