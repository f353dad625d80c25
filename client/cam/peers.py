"""The two peer connections of `facefuse cam`: one publishes the camera (WHIP), one plays the
swapped video (WHEP). Both are tuned as the server's own peers (`stream`), and gather ICE
candidates as the server does when it runs on loopback, so a local run stays on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import json
from collections import deque
from typing import Any
from urllib.parse import urlsplit

from aiortc import MediaStreamTrack, RTCDataChannel, RTCPeerConnection, RTCRtpSender, RTCSessionDescription

from stream.encoder import tune_sender
from stream.ice import IceSettings, refuse_outside_checks, restrict_gathering, rtc_configuration
from stream.receiver_tuning import tune_receiver

# The server's events on the publisher's data channel (closed, meter, exhausted, ...): the latest few.
KEPT_EVENTS = 50


def ice_for(server_url: str, ice_servers: tuple[str, ...] = ()) -> IceSettings:
    """A server on loopback: candidates on 127.0.0.1 only (aioice never offers loopback by itself).
    Else every interface, and the STUN/TURN servers given."""
    host = urlsplit(server_url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    return IceSettings(hosts=("127.0.0.1",), servers=ice_servers) if loopback else IceSettings(servers=ice_servers)


def _prefer(transceiver: Any, kind: str, mime_types: tuple[str, ...]) -> None:
    """The codecs of `mime_types` first, in that order, then the rest aiortc has."""
    codecs = RTCRtpSender.getCapabilities(kind).codecs
    ranked = sorted(codecs, key=lambda c: mime_types.index(c.mimeType) if c.mimeType in mime_types else len(mime_types))
    transceiver.setCodecPreferences(ranked)


class PublishingPeer:
    """Sends the camera track, sendonly, with a data channel for the session's events."""

    def __init__(self, track: MediaStreamTrack, ice: IceSettings) -> None:
        self.ice = ice
        self.pc = RTCPeerConnection(rtc_configuration(ice))
        self.events: deque[dict[str, Any]] = deque(maxlen=KEPT_EVENTS)
        self.channel: RTCDataChannel = self.pc.createDataChannel("events")
        self.channel.on("message", self._on_message)
        transceiver = self.pc.addTransceiver(track, direction="sendonly")
        # VP8 first: the server decodes it as well as H.264, and aiortc encodes it without libx264's threads
        _prefer(transceiver, "video", ("video/VP8", "video/H264"))

    def _on_message(self, message: str | bytes) -> None:
        try:
            event = json.loads(message)
        except ValueError:
            return
        if isinstance(event, dict):
            self.events.append(event)

    def closed_event(self) -> dict[str, Any] | None:
        """The server's `closed` event, once it said it ends the session."""
        return next((e for e in reversed(self.events) if e.get("type") == "closed"), None)

    async def offer(self) -> str:
        return await _offer(self.pc, self.ice)

    async def answer(self, sdp: str) -> None:
        await _answer(self.pc, sdp)


class PlayingPeer:
    """Receives the swapped video, recvonly; `track` is set once the answer is applied."""

    def __init__(self, ice: IceSettings) -> None:
        self.ice = ice
        self.pc = RTCPeerConnection(rtc_configuration(ice))
        self._transceiver = self.pc.addTransceiver("video", direction="recvonly")
        _prefer(self._transceiver, "video", ("video/VP8", "video/H264"))  # VP8 first, as a WHEP player should
        self.track: MediaStreamTrack | None = None

    async def offer(self) -> str:
        return await _offer(self.pc, self.ice)

    async def answer(self, sdp: str) -> None:
        await _answer(self.pc, sdp)
        self.track = self._transceiver.receiver.track  # aiortc makes it when the answer is applied


async def _offer(pc: RTCPeerConnection, ice: IceSettings) -> str:
    offer = await pc.createOffer()
    refuse_outside_checks(pc, ice)
    await restrict_gathering(pc, ice)
    await pc.setLocalDescription(offer)
    return pc.localDescription.sdp


async def _answer(pc: RTCPeerConnection, sdp: str) -> None:
    await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="answer"))
    for negotiated in pc.getTransceivers():  # the same receive/send path as the server's
        tune_receiver(negotiated.receiver)
        if negotiated.kind == "video":
            tune_sender(negotiated)
