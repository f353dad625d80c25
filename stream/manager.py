"""All live sessions of one server: creates, finds, lists and closes them."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping

from pipeline.faces import FaceLibrary
from pipeline.runner import BatchRunner
from stream.errors import (
    LineFull,
    NodeDraining,
    SessionClosedEarly,
    SessionForbidden,
    SessionNotFound,
    StreamNotLive,
    TooManySessions,
    ViewerNotFound,
)
from stream.frame_timings import FrameTimings
from stream.metering import MeterFactory
from stream.node_capacity import NodeCapacity
from stream.node_totals import EndedTotals
from stream.offer_check import checked_offer
from stream.published_streams import Publication, PublishedStreams
from stream.recently_ended import RecentlyEnded
from stream.sdp import ice_credentials
from stream.session import Session
from stream.settings import StreamSettings
from stream.viewer import Viewer
from stream.viewer_admission import check_room_for_viewer

logger = logging.getLogger(__name__)


class SessionManager:
    def __init__(
        self,
        runner: BatchRunner,
        settings: StreamSettings,
        faces: FaceLibrary | None = None,
        timings: FrameTimings | None = None,
        capacity: NodeCapacity | None = None,
    ) -> None:
        self._runner = runner
        self.capacity = capacity if capacity is not None else NodeCapacity(runner, settings)
        self._settings = settings
        self._faces = faces if faces is not None else FaceLibrary()
        self._sessions: dict[str, Session] = {}
        self._viewers: dict[str, Viewer] = {}
        self.streams = PublishedStreams()
        self.draining = False  # no new sessions: signaling/drain.py
        self.recently_ended = RecentlyEnded()  # published sessions and viewers, for a late DELETE
        self.ended = EndedTotals()  # what ended sessions counted: the node's counters never go back
        self._timings = timings  # each frame's latency and encoding, for the node's histograms

    async def open(
        self,
        offer_sdp: str,
        *,
        face_id: str | None = None,
        options: Mapping[str, object] | None = None,
        account_id: str | None = None,
        make_meter: MeterFactory | None = None,
        stream: str | None = None,
    ) -> tuple[Session, str]:
        """Creates a session from an offer; returns it with the answer SDP.

        With a meter, its lease is opened before any negotiation work, so an
        account with nothing to spend (or too many sessions) is refused cheaply.
        With a stream name, the session is published under it and ends the
        account's earlier session of that name ("replaced"): before the new
        lease, so a reconnecting publisher is not refused by its own old session.
        """
        self.refuse_if_draining()
        offer_sdp = checked_offer(offer_sdp, self._settings.ice)  # InvalidOffer before a lease is opened
        if stream is not None:
            await self._end_publication(self.streams.find(account_id, stream))
        limit = self._settings.max_sessions
        if limit is not None and len(self._sessions) >= limit:
            raise TooManySessions(f"the server is full ({limit} sessions); try again later")
        processed_now = self.capacity.admits(self.all())
        if not processed_now and self.capacity.line_full():
            self.capacity.refuse()
            raise LineFull(
                f"the server is full and {len(self.capacity.line)} sessions already wait for room; try again later"
            )
        session = Session(
            secrets.token_urlsafe(12),
            self._runner,
            self._settings,
            face_id=face_id,
            options=options,
            account_id=account_id,
            faces=self._faces,
            make_meter=make_meter,
            on_closed=self._forget,
            timings=self._timings,
        )
        self._sessions[session.id] = session
        if not processed_now:
            self.capacity.join_line(session)  # its own video comes back unprocessed until room frees
        try:
            if session.meter is not None:
                await session.meter.open()
                if session.closing:  # closed while the lease opened: its close ran before the lease existed
                    await session.meter.close()
                    raise SessionClosedEarly("the session was closed while its lease was being opened")
            answer = await session.accept(offer_sdp)
        except BaseException:
            await session.close("negotiation failed", "negotiation_failed")
            raise
        if stream is not None:
            session.stream = stream
            ufrag, pwd = ice_credentials(offer_sdp)
            # another publisher of the name may have been answered while this one negotiated
            await self._end_publication(self.streams.publish(Publication(account_id, stream, session.id, ufrag, pwd)))
        return session, answer

    def refuse_if_draining(self) -> None:
        if self.draining:
            raise NodeDraining("this server is restarting and takes no new sessions; try again in a few seconds")

    async def open_viewer(
        self, offer_sdp: str, *, account_id: str | None, stream: str, token_id: str | None = None
    ) -> tuple[Viewer, str]:
        """A WHEP viewer of the account's session published under `stream`, playing with the view
        token `token_id` (None: the owner); returns it with the answer SDP. StreamNotLive while
        nothing is published there; a TooManyViewers at a limit (stream/viewer_admission.py)."""
        offer_sdp = checked_offer(offer_sdp, self._settings.ice, viewer=True)
        publication = self.streams.find(account_id, stream)
        session = self._sessions.get(publication.session_id) if publication is not None else None
        if session is None or session.closing:
            raise StreamNotLive(f"nothing is published under the stream name {stream!r} now")
        check_room_for_viewer(self.viewers(), session.id, stream, token_id, self._settings)
        viewer = Viewer(secrets.token_urlsafe(12), session, stream, on_closed=self._forget_viewer, token_id=token_id)
        self._viewers[viewer.id] = viewer
        try:
            answer = await viewer.accept(offer_sdp)
        except BaseException:
            await viewer.close("negotiation failed")
            raise
        if session.closing:  # the publisher left while this viewer negotiated
            await viewer.close("the stream ended")
            raise StreamNotLive(f"the stream {stream!r} ended while the viewer's offer was being answered")
        return viewer, answer

    async def close_viewers_of_tokens(self, token_ids: set[str], reason: str) -> int:
        """Closes the viewers playing with any of these view tokens (revoked); how many there were."""
        viewers = [viewer for viewer in self._viewers.values() if viewer.token_id in token_ids]
        await asyncio.gather(*(viewer.close(reason) for viewer in viewers), return_exceptions=True)
        return len(viewers)

    def viewers(self, session_id: str | None = None) -> list[Viewer]:
        """Every viewer, or one session's."""
        return [v for v in self._viewers.values() if session_id is None or v.session.id == session_id]

    def get_viewer(self, viewer_id: str, account_id: str | None = None) -> Viewer:
        viewer = self._viewers.get(viewer_id)
        if viewer is None:
            raise ViewerNotFound(f"no viewer {viewer_id!r}")
        if account_id is not None and viewer.account_id != account_id:
            raise SessionForbidden(f"viewer {viewer_id!r} watches another account's stream")
        return viewer

    def get(self, session_id: str, account_id: str | None = None) -> Session:
        """The session; SessionForbidden when `account_id` is given and it is another account's."""
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(f"no session {session_id!r}")
        if account_id is not None and session.account_id != account_id:
            raise SessionForbidden(f"session {session_id!r} belongs to another account")
        return session

    def all(self, account_id: str | None = None) -> list[Session]:
        """Every session, or one account's."""
        return [s for s in self._sessions.values() if account_id is None or s.account_id == account_id]

    async def close(self, session_id: str, reason: str = "closed by request", account_id: str | None = None) -> Session:
        session = self.get(session_id, account_id)
        await session.close(reason, "closed_by_request")
        return session

    async def close_all(self, reason: str = "server shutting down") -> None:
        await asyncio.gather(
            *(session.close(reason, "server_shutdown") for session in self.all()), return_exceptions=True
        )
        # a session's close lets its viewers go only after it is closed: a shutdown waits for them
        # too (viewer.close() waits for one already closing), or their sockets outlive the loop
        await asyncio.gather(*(viewer.close(reason) for viewer in self.viewers()), return_exceptions=True)

    async def _end_publication(self, publication: Publication | None) -> None:
        session = self._sessions.get(publication.session_id) if publication is not None else None
        if session is not None:
            await session.close(f"a new publisher took the stream {publication.name!r}", "replaced")

    async def _forget(self, session: Session) -> None:
        if self._sessions.pop(session.id, None) is not None:  # the same step: no scrape counts it twice or not at all
            self.ended.add_session(session.stats, session.webrtc, session.meter.event() if session.meter else None)
            self.capacity.session_ended(session, self.all())  # the first in line may start now
        if session.stream is not None:
            self.recently_ended.add(session.id, session.account_id, session.stream, session.snapshot())
        self.streams.forget(session.id)
        viewers = self.viewers(session.id)
        await asyncio.gather(*(v.close(f"the stream {v.stream!r} ended") for v in viewers), return_exceptions=True)

    def _forget_viewer(self, viewer: Viewer) -> None:
        if self._viewers.pop(viewer.id, None) is not None:
            self.ended.add_viewer(viewer.webrtc)
        self.recently_ended.add(viewer.id, viewer.account_id, viewer.stream, viewer.snapshot())
