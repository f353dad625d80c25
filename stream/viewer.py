"""A WHEP viewer: one peer connection that plays a live session's processed video and its audio.

The viewer reads its own tracks from the session's fanout and audio relay, so it costs the
session nothing but its encoding (each viewer encodes for its own connection) and never holds
the publisher back: a viewer that cannot keep up drops its own frames. Viewers are not metered:
the publisher's session pays for each processed frame once, whoever sends it first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from aiortc import RTCIceCandidate, RTCPeerConnection

from pipeline.runner import FrameResult
from stream.errors import SessionClosedEarly
from stream.ice import refuse_outside_checks, rtc_configuration
from stream.negotiation import answer_offer, answer_sdp, apply_offer, tune_video_senders
from stream.peer_close import close_peer
from stream.processed_track import ProcessedTrack
from stream.sdp import ice_credentials
from stream.session import Session
from stream.trickle import TrickleBudget, add_trickled_candidates, candidate_count
from stream.webrtc_counts import WebrtcCounts

logger = logging.getLogger(__name__)


class Viewer:
    def __init__(
        self,
        viewer_id: str,
        session: Session,
        stream: str,
        on_closed: Callable[[Viewer], None],
        token_id: str | None = None,
    ) -> None:
        self.id = viewer_id
        self.session = session
        self.stream = stream
        self.token_id = token_id  # the view token it plays with; None: the owner's API key (or local mode)
        self.state = "new"  # new -> connecting -> live -> closed
        self.close_reason: str | None = None
        self.created_at = time.time()
        self.codec: str | None = None
        self.frames_sent = 0
        self.frames_dropped = 0
        self.ice_ufrag = ""
        self.ice_pwd = ""
        self._on_closed = on_closed
        self._settings = session.settings
        self._pc = RTCPeerConnection(rtc_configuration(self._settings.ice))
        timings = session.timings
        self._video = ProcessedTrack(
            on_sent=self._frame_sent,
            on_replaced=self._frame_replaced,
            on_encoded=timings.encode if timings is not None else None,
        )
        self._audio = session.audio.subscribe() if session.audio.has_source else None
        self._close_started = False
        self._closed = asyncio.Event()
        self._connect_deadline: asyncio.Task[None] | None = None
        self._connected_once = False
        self._trickle = TrickleBudget(0, self._settings.idle_timeout_s)  # the offer's own count once accepted
        self.webrtc = WebrtcCounts()  # for the node's metrics

    @property
    def account_id(self) -> str | None:
        return self.session.account_id

    async def accept(self, offer_sdp: str) -> str:
        """Applies a checked viewer offer (offer_check.checked_offer, viewer=True); returns the answer."""
        self.state = "connecting"
        self.ice_ufrag, self.ice_pwd = ice_credentials(offer_sdp)
        self._trickle = TrickleBudget(candidate_count(offer_sdp), self._settings.idle_timeout_s)
        self._pc.on("connectionstatechange", self._on_connection_state)
        await apply_offer(self._pc, offer_sdp, self._refuse_if_closed)
        refuse_outside_checks(self._pc, self._settings.ice)
        self._pc.addTrack(self._video)  # the offer's recvonly video section: answered sendonly
        if self._audio is not None and any(t.kind == "audio" for t in self._pc.getTransceivers()):
            self._pc.addTrack(self._audio)
        await answer_offer(self._pc, self._settings, self._refuse_if_closed)
        self.codec = tune_video_senders(self._pc)
        self.session.video_out.add(self._video)  # from now on the session's frames reach this viewer
        self._connect_deadline = asyncio.ensure_future(self._close_unless_connected(self._settings.idle_timeout_s))
        self._connect_deadline.set_name(f"viewer-{self.id}-connect-deadline")
        return answer_sdp(self._pc, self._settings)

    async def _close_unless_connected(self, timeout_s: float) -> None:
        """A viewer whose connection is not up in time holds a slot of its stream for nothing (an
        offer posted and never followed by ICE): closed, as a session that never starts is."""
        await asyncio.sleep(timeout_s)
        if not self._connected_once:  # one that connected and blinks now is ICE's to judge, not this
            await self.close(f"not connected within {timeout_s:g} s")

    def _refuse_if_closed(self) -> None:
        if self._close_started:
            raise SessionClosedEarly(f"the viewer was closed ({self.close_reason}) while its offer was being answered")

    async def add_remote_candidates(self, candidates: list[RTCIceCandidate], end: bool) -> None:
        self._trickle.take(len(candidates))  # TrickleRefused or TooManyCandidates past its allowance
        await add_trickled_candidates(self._pc, candidates, end, closed=lambda: self._close_started)

    def _frame_sent(self, result: FrameResult, now: float) -> None:
        self.frames_sent += 1
        if self.state == "connecting":
            self.state = "live"
        self.session.frame_sent(result, now)

    def _frame_replaced(self) -> None:
        self.frames_dropped += 1

    def _on_connection_state(self) -> None:
        if self._pc.connectionState == "connected":
            self._connected_once = True
        if self._pc.connectionState in ("failed", "closed"):
            task = asyncio.ensure_future(self.close(f"connection {self._pc.connectionState}"))
            task.set_name(f"viewer-{self.id}-close")

    @property
    def closing(self) -> bool:
        return self._close_started

    async def refresh_webrtc_counts(self) -> None:
        await self.webrtc.refresh(self._pc)

    async def close(self, reason: str) -> None:
        """Idempotent: stops its tracks (the session's fanout lets go of them) and closes its peer."""
        if self._close_started:
            await self._closed.wait()
            return
        self._close_started = True
        self.close_reason = reason
        logger.info("viewer %s of session %s closing: %s", self.id, self.session.id, reason)
        deadline = self._connect_deadline
        if deadline is not None and deadline is not asyncio.current_task():
            deadline.cancel()
        try:
            self.session.video_out.remove(self._video)
            self._video.stop()
            if self._audio is not None:
                self._audio.stop()
            await self.refresh_webrtc_counts()  # the last figures, before the node's totals take them
            if not await close_peer(self._pc):
                logger.warning("viewer %s: its peer connection did not close in time; left behind", self.id)
        finally:
            self.state = "closed"
            self._closed.set()
            self._on_closed(self)

    def snapshot(self) -> dict[str, object]:
        return {
            "viewer_id": self.id,
            "stream": self.stream,
            "session_id": self.session.id,
            "view_token_id": self.token_id,
            "state": self.state,
            "created_at": self.created_at,
            "codec": self.codec,
            "frames_sent": self.frames_sent,
            "frames_dropped": self.frames_dropped,
            "audio_frames_dropped": self._audio.frames_dropped if self._audio is not None else None,
            "close_reason": self.close_reason,
        }
