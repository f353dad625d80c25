"""An aiortc WHEP player (draft-ietf-wish-whep): POSTs a recvonly offer to /whep/{stream} and
reads what comes back (its video receiver tuned as the server's: stream/receiver_tuning.py), counting frames, keeping the last video frame, and handing each frame with
its arrival time to the test's callbacks."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import aiohttp
import av
from aiortc import MediaStreamTrack, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError
from multidict import CIMultiDict

from stream.ice import refuse_outside_checks, restrict_gathering, rtc_configuration
from stream.peer_close import close_peer
from stream.receiver_tuning import tune_receiver
from support.whip_publisher import LOOPBACK

OnFrame = Callable[[av.frame.Frame, float], None]


@dataclass
class WhepViewer:
    pc: RTCPeerConnection
    status: int = 0
    headers: CIMultiDict[str] = field(default_factory=CIMultiDict)
    body: str = ""
    answered_in_s: float = 0.0
    video_frames: int = 0
    audio_frames: int = 0
    last_video: av.VideoFrame | None = None
    _readers: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def location(self) -> str:
        return self.headers["Location"]


async def _read(track: MediaStreamTrack, viewer: WhepViewer, on_frame: OnFrame | None) -> None:
    with contextlib.suppress(MediaStreamError):
        while True:
            frame = await track.recv()
            arrived = time.monotonic()
            if track.kind == "video":
                viewer.video_frames += 1
                viewer.last_video = frame
            else:
                viewer.audio_frames += 1
            if on_frame is not None:
                on_frame(frame, arrived)


@contextlib.asynccontextmanager
async def whep_viewer(
    http: aiohttp.ClientSession,
    url: str,
    *,
    token: str | None = None,
    audio: bool = True,
    read: bool = True,
    on_video: OnFrame | None = None,
    on_audio: OnFrame | None = None,
) -> AsyncIterator[WhepViewer]:
    """POSTs a recvonly offer to `url` (…/whep/{stream}); yields the viewer whatever the status (a
    test looks at it). With read=False nothing reads the tracks: a viewer that never reads. On
    exit: DELETE (when it was created) and close."""
    pc = RTCPeerConnection(rtc_configuration(LOOPBACK))
    pc.addTransceiver("video", direction="recvonly")
    if audio:
        pc.addTransceiver("audio", direction="recvonly")
    viewer = WhepViewer(pc)
    callbacks = {"video": on_video, "audio": on_audio}
    pc.on(
        "track",
        lambda track: (
            read and viewer._readers.append(asyncio.ensure_future(_read(track, viewer, callbacks[track.kind])))
        ),
    )
    try:
        refuse_outside_checks(pc, LOOPBACK)
        await restrict_gathering(pc, LOOPBACK)
        await pc.setLocalDescription(await pc.createOffer())
        headers = {"Content-Type": "application/sdp"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        started = time.monotonic()
        async with http.post(url, data=pc.localDescription.sdp.encode(), headers=headers) as response:
            viewer.body = await response.text()
            viewer.answered_in_s = time.monotonic() - started
            viewer.status = response.status
            viewer.headers = response.headers.copy()
        if viewer.status == 201:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=viewer.body, type="answer"))
            for transceiver in pc.getTransceivers():  # a player releases a frame on its marker bit, as browsers do
                tune_receiver(transceiver.receiver)
        yield viewer
    finally:
        for reader in viewer._readers:
            reader.cancel()
        await asyncio.gather(*viewer._readers, return_exceptions=True)
        if viewer.status == 201:
            origin = url.split("/whep/")[0]
            with contextlib.suppress(aiohttp.ClientError):
                async with http.delete(origin + viewer.location, headers=headers) as response:
                    await response.read()
        await close_peer(pc)
