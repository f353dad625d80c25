"""All live sessions of one server: creates, finds, lists and closes them."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping

from pipeline.runner import BatchRunner
from stream.errors import SessionNotFound, TooManySessions
from stream.session import Session
from stream.settings import StreamSettings

logger = logging.getLogger(__name__)


class SessionManager:
    def __init__(self, runner: BatchRunner, settings: StreamSettings) -> None:
        self._runner = runner
        self._settings = settings
        self._sessions: dict[str, Session] = {}

    async def open(
        self, offer_sdp: str, *, face_id: str | None = None, options: Mapping[str, object] | None = None
    ) -> tuple[Session, str]:
        """Creates a session from an offer; returns it with the answer SDP."""
        if len(self._sessions) >= self._settings.max_sessions:
            raise TooManySessions(f"the server is full ({self._settings.max_sessions} sessions); try again later")
        session = Session(
            secrets.token_urlsafe(12),
            self._runner,
            self._settings,
            face_id=face_id,
            options=options,
            on_closed=self._forget,
        )
        self._sessions[session.id] = session
        try:
            answer = await session.accept(offer_sdp)
        except BaseException:
            await session.close("negotiation failed")
            raise
        return session, answer

    def get(self, session_id: str) -> Session:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise SessionNotFound(f"no session {session_id!r}") from None

    def all(self) -> list[Session]:
        return list(self._sessions.values())

    async def close(self, session_id: str, reason: str = "closed by request") -> Session:
        session = self.get(session_id)
        await session.close(reason)
        return session

    async def close_all(self, reason: str = "server shutting down") -> None:
        await asyncio.gather(*(session.close(reason) for session in self.all()), return_exceptions=True)

    def _forget(self, session: Session) -> None:
        self._sessions.pop(session.id, None)
