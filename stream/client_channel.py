"""The data-channel protocol: the events a session sends its client, the commands it answers.

Events are JSON objects with a "type": meter, exhausted, stats, error, closed, and the answers
to commands (face, swap). Commands are JSON objects with a "type" (set_face, set_swap); each is
answered with an event, its result or an error naming it, and one that fails changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from aiortc import RTCDataChannel

from pipeline.faces import FaceForbidden, FaceLibrary, FaceNotFound, FaceStoreUnavailable
from stream.errors import InvalidCommand
from stream.swap_options import InvalidSwapOptions

logger = logging.getLogger(__name__)

# Commands are small JSON objects; a bound keeps their parsing and the answers that name them small
# (an answer over the peer's SCTP message limit cannot be sent at all).
MAX_COMMAND_CHARS = 4096
# Events are best effort: past this much unsent, a client that does not read loses them instead of
# growing our send buffer forever.
MAX_BUFFERED_BYTES = 256 * 1024


def _faces_named(kind: object, command: Mapping[str, Any]) -> list[str]:
    """The face ids a set_face or set_swap command names."""
    key = {"set_face": "face_id", "set_swap": "reference_face_id"}.get(kind) if isinstance(kind, str) else None
    face_id = command.get(key) if key is not None else None
    return [face_id] if isinstance(face_id, str) and face_id else []


def error_event(code: str, message: str) -> dict[str, object]:
    return {"type": "error", "code": code, "message": message}


def closed_event(code: str, reason: str) -> dict[str, object]:
    return {"type": "closed", "code": code, "reason": reason}


class CommandTarget(Protocol):
    """What the commands change: the session."""

    face_id: str | None

    def set_face(self, face_id: str | None) -> None: ...

    def set_swap(
        self, mode: object, reference_face_id: object = None, reference_threshold: object = None
    ) -> dict[str, object]: ...


class ClientChannel:
    """One session's data channel, once the client opens it: events out, commands in."""

    def __init__(
        self,
        session_id: str,
        target: CommandTarget,
        *,
        faces: FaceLibrary | None = None,
        account_id: str | None = None,
        spawn: Callable[[Awaitable[None], str], None] | None = None,
    ) -> None:
        self._session_id = session_id
        self._target = target
        self._channel: RTCDataChannel | None = None
        # a command naming a face uploaded on another node waits for it to be read (shared_faces.py)
        self._faces = faces
        self._account_id = account_id
        self._spawn = spawn

    def attach(self, channel: RTCDataChannel) -> None:
        self._channel = channel
        channel.on("message", self._on_message)

    @property
    def is_open(self) -> bool:
        return self._channel is not None and self._channel.readyState == "open"

    def send(self, event: Mapping[str, Any]) -> None:
        """Sends a JSON event to the client if its data channel is open (events are best effort)."""
        channel = self._channel
        if channel is not None and channel.readyState == "open" and channel.bufferedAmount < MAX_BUFFERED_BYTES:
            try:
                channel.send(json.dumps(event))
            except ValueError as exc:  # over the peer's message size: dropped like a full buffer's
                logger.warning("session %s: an event was not sent: %s", self._session_id, exc)

    async def wait_open(self, within_s: float) -> None:
        """Waits (a little) for the client to open its channel: the first keyframe can come before."""
        deadline = time.monotonic() + within_s
        while not self.is_open and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def tell(self, event: Mapping[str, Any], within_s: float) -> None:
        """Sends an event that must arrive before the connection closes: waits (a little) for it
        to leave the send buffer, and for SCTP to put it on the wire."""
        if not self.is_open:
            return
        self.send(event)
        deadline = time.monotonic() + within_s
        while self.is_open and self._channel.bufferedAmount and time.monotonic() < deadline:  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)  # handed to SCTP is not yet on the wire

    # -- commands ---------------------------------------------------------------------------
    def _on_message(self, message: str | bytes) -> None:
        """Nothing raised here may reach aiortc: an exception in its message callback tears the
        peer connection down."""
        try:
            self._answer(message)
        except Exception:
            logger.exception("session %s: a command could not be answered", self._session_id)
            with contextlib.suppress(Exception):  # the answer itself may be what failed
                self.send(error_event("internal_error", "the command could not be carried out"))

    def _answer(self, message: str | bytes) -> None:
        if len(message) > MAX_COMMAND_CHARS:
            self.send(error_event("invalid_command", f"commands are at most {MAX_COMMAND_CHARS} characters long"))
            return
        try:
            command = json.loads(message)
            kind = command["type"]
        except (ValueError, TypeError, KeyError, RecursionError):  # RecursionError: JSON nested too deep
            self.send(error_event("invalid_command", "expected a JSON object with a 'type'"))
            return
        named = _faces_named(kind, command)
        if self._faces is not None and self._faces.fetcher is not None and self._spawn is not None and named:
            if not all(self._faces.has(face_id) for face_id in named):
                self._spawn(self._fetch_then_answer(named, kind, command), "fetch-face")
                return
        self._carry_out_and_answer(kind, command)

    async def _fetch_then_answer(self, named: list[str], kind: object, command: Mapping[str, Any]) -> None:
        try:
            await self._faces.fetch_named(self._account_id, *named)  # type: ignore[union-attr]
        except (FaceNotFound, FaceForbidden, FaceStoreUnavailable) as exc:
            self.send({**error_event(exc.code, str(exc)), "command": kind})
            return
        try:
            self._carry_out_and_answer(kind, command)
        except Exception:
            logger.exception("session %s: a command could not be answered", self._session_id)
            self.send(error_event("internal_error", "the command could not be carried out"))

    def _carry_out_and_answer(self, kind: object, command: Mapping[str, Any]) -> None:
        try:
            answer = self._carry_out(kind, command)
        except (InvalidCommand, InvalidSwapOptions, FaceNotFound, FaceForbidden) as exc:
            code = "invalid_command" if isinstance(exc, InvalidSwapOptions) else exc.code
            self.send({**error_event(code, exc.args[0]), "command": kind})
            return
        self.send(answer)

    def _carry_out(self, kind: object, command: Mapping[str, Any]) -> dict[str, object]:
        target = self._target
        if kind == "set_face":
            face_id = command.get("face_id", "")
            if not (face_id is None or (isinstance(face_id, str) and face_id)):
                raise InvalidCommand("set_face needs 'face_id': a face's id, or null to stop swapping")
            target.set_face(face_id)
            return {"type": "face", "face_id": target.face_id}
        if kind == "set_swap":
            if "swap" not in command:
                raise InvalidCommand("set_swap needs 'swap': all, largest or reference")
            reference, threshold = command.get("reference_face_id"), command.get("reference_threshold")
            swap = target.set_swap(command["swap"], reference, threshold)
            return {"type": "swap", **swap}
        raise InvalidCommand(f"unknown command type {kind!r}", code="unknown_command")
