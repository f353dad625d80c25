"""A Python client for a facefuse server: uploads a face, streams a track, receives the result.

What a script (or a test, or a benchmark) uses instead of a browser. Real aiortc
peer, real HTTP; ICE restricted like the server's so loopback tests stay on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import av
from aiortc import MediaStreamTrack, RTCDataChannel, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from client.cam.whip_http import KEEP_METHOD_REDIRECTS, MAX_REDIRECTS, _redirect_target
from stream.encoder import tune_sender
from stream.ice import IceSettings, refuse_outside_checks, restrict_gathering, rtc_configuration
from stream.peer_close import close_peer
from stream.receiver_tuning import tune_receiver


class ServerError(RuntimeError):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message = status, code, message


@dataclass
class ReceivedFrame:
    frame: av.VideoFrame
    at: float  # time.monotonic() on arrival


@dataclass
class ClientSession:
    session_id: str
    pc: RTCPeerConnection
    received: deque[ReceivedFrame] = field(default_factory=lambda: deque(maxlen=90))  # ~40 MB at 480p
    events: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=200))
    frames_received: int = 0
    channel: RTCDataChannel | None = None  # the "events" channel: the server's events, our commands
    _reader: asyncio.Task[None] | None = None

    def send_command(self, command: Mapping[str, object]) -> None:
        """A JSON command on the data channel (set_face, set_swap); the server answers with an event."""
        if self.channel is None or self.channel.readyState != "open":
            raise RuntimeError("the session's data channel is not open")
        self.channel.send(json.dumps(command))

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await close_peer(self.pc)


async def _json_answer(response: aiohttp.ClientResponse) -> Any:
    """The JSON body, or ServerError with the server's error code."""
    body = await response.json(content_type=None)
    if response.status >= 400:
        error = body.get("error", {}) if isinstance(body, dict) else {}
        raise ServerError(response.status, error.get("code", "?"), error.get("message", str(body)))
    return body


class FacefuseClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, ice: IceSettings | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.ice = ice if ice is not None else IceSettings(hosts=("127.0.0.1",))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self._http = aiohttp.ClientSession(headers=headers)

    async def close(self) -> None:
        await self._http.close()

    async def __aenter__(self) -> FacefuseClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        async with self._http.request(method, self.base_url + path, **kwargs) as response:
            return await _json_answer(response)

    async def _post_offer(self, offer: Mapping[str, object]) -> Any:
        """POST /api/offer, following a 307 to the node that takes the session (a full or busy node
        sends it on) with the same body and key: aiohttp itself would drop Authorization on the way."""
        url = self.base_url + "/api/offer"
        for _ in range(MAX_REDIRECTS + 1):
            async with self._http.post(url, json=offer, allow_redirects=False) as response:
                if response.status not in KEEP_METHOD_REDIRECTS:
                    return await _json_answer(response)
                url = _redirect_target(url, response.headers.get("Location"), "key")
        raise ServerError(508, "redirect_loop", f"more than {MAX_REDIRECTS} redirects from {self.base_url}/api/offer")

    async def upload_face(self, image: bytes, content_type: str = "image/jpeg") -> str:
        body = await self.request("POST", "/api/faces", data=io.BytesIO(image), headers={"Content-Type": content_type})
        return body["id"]

    async def connect(
        self,
        track: MediaStreamTrack,
        *,
        codec: str | None = None,
        face_id: str | None = None,
        options: Mapping[str, object] | None = None,
        on_frame: Callable[[ReceivedFrame], None] | None = None,
    ) -> ClientSession:
        """Sends `track`, receives the processed video on the same transceiver; codec: 'VP8' or 'H264'."""
        pc = RTCPeerConnection(rtc_configuration(self.ice))
        channel = pc.createDataChannel("events")
        transceiver = pc.addTransceiver(track, direction="sendrecv")
        if codec is not None:
            wanted = f"video/{codec}".lower()
            codecs = [c for c in RTCRtpSender.getCapabilities("video").codecs if c.mimeType.lower() == wanted]
            transceiver.setCodecPreferences(codecs)
        remote: asyncio.Future[MediaStreamTrack] = asyncio.get_running_loop().create_future()
        pc.on("track", lambda t: remote.done() or remote.set_result(t))
        await self._offer(pc)
        try:
            answer = await self._post_offer(
                {"sdp": pc.localDescription.sdp, "type": "offer", "face_id": face_id, "options": dict(options or {})}
            )
            await pc.setRemoteDescription(RTCSessionDescription(sdp=answer["sdp"], type="answer"))
            for negotiated in pc.getTransceivers():  # the same receive/send path as the server's
                tune_receiver(negotiated.receiver)
                if negotiated.kind == "video":
                    tune_sender(negotiated)
        except BaseException:
            await pc.close()
            raise
        session = ClientSession(answer["session_id"], pc, channel=channel)
        channel.on("message", lambda message: session.events.append(json.loads(message)))
        session._reader = asyncio.ensure_future(self._read(await remote, session, on_frame))
        return session

    async def _offer(self, pc: RTCPeerConnection) -> None:
        offer = await pc.createOffer()
        refuse_outside_checks(pc, self.ice)
        await restrict_gathering(pc, self.ice)
        await pc.setLocalDescription(offer)

    @staticmethod
    async def _read(
        track: MediaStreamTrack, session: ClientSession, on_frame: Callable[[ReceivedFrame], None] | None
    ) -> None:
        with contextlib.suppress(MediaStreamError):
            while True:
                frame = await track.recv()
                received = ReceivedFrame(frame, time.monotonic())
                session.frames_received += 1
                session.received.append(received)
                if on_frame is not None:
                    on_frame(received)
