"""GET /api/events: a dashboard's Server-Sent Events stream, one `snapshot` event about once a second
(dashboard_snapshot.py builds it; docs/api.md, "Dashboard events").

A client that stops reading must not grow the server's memory: before each snapshot the socket's
unsent bytes are looked at, a snapshot is skipped while more than one is waiting there, and a
client that takes nothing for `stall_s` is dropped. Every write has that bound too, so a handler
never waits on a client for good. The app's shutdown ends every stream at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time

from aiohttp import web

from signaling.caller import account_or_admin
from signaling.client_address import client_address
from signaling.dashboard_snapshot import DashboardSnapshots
from signaling.errors import CLIENT_CLOSED_REQUEST, ApiError
from signaling.event_streams import ADMIN, EventStreams

logger = logging.getLogger(__name__)
routes = web.RouteTableDef()

EVENT_STREAMS = web.AppKey("event_streams", EventStreams)

# What the socket may hold unsent before snapshots are skipped, beside one snapshot's own size:
# asyncio's default high-water mark, under which a write does not wait.
MAX_BUFFERED_BYTES = 64 * 1024
# The kernel's send buffer for a stream: Linux grows a socket's up to 4 MB (tcp_wmem), which a client
# that stops reading would hold, 200 of them 800 MB. A second's snapshot is a few KB.
SEND_BUFFER_BYTES = 64 * 1024

BUILD_FAILED = {"code": "internal_error", "message": "the server failed to build this update; it tries again"}

HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}  # nginx: pass each event on at once


def sse_event(name: str, data: object) -> bytes:
    """One event in the SSE wire format; json.dumps escapes newlines, so the data is one line."""
    return f"event: {name}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


class _Client:
    """Writes to one client within the bounds above; False once it is gone or dropped."""

    def __init__(self, request: web.Request, response: web.StreamResponse, stall_s: float) -> None:
        self._transport = request.transport
        sock = self._transport.get_extra_info("socket") if self._transport is not None else None
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        self._response = response
        self._peer = client_address(request) or request.remote  # behind a --trusted-proxy, the client
        self._stall_s = stall_s
        self._behind_since: float | None = None
        self.last_write = time.monotonic()

    @property
    def gone(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    async def send(self, payload: bytes) -> bool:
        if self.gone:
            return False
        now = time.monotonic()
        if self._transport.get_write_buffer_size() > max(MAX_BUFFERED_BYTES, len(payload)):
            self._behind_since = self._behind_since if self._behind_since is not None else now
            if now - self._behind_since < self._stall_s:
                return True  # skipped: the client has older bytes to read first
            return self._drop("it read nothing")
        self._behind_since = None
        try:
            async with asyncio.timeout(self._stall_s):
                await self._response.write(payload)
        except TimeoutError:
            return self._drop("a write waited too long")
        except ConnectionError:
            return False
        self.last_write = time.monotonic()
        return True

    def _drop(self, why: str) -> bool:
        logger.info("event stream to %s dropped: %s for %g s", self._peer, why, self._stall_s)
        self._transport.abort()  # a close would wait to flush what the client does not read
        return False


async def _snapshot(snapshots: DashboardSnapshots) -> dict[str, object]:
    try:
        return await snapshots.build()
    except Exception:  # a bug: the page says so, and the next second tries again
        logger.exception("building a dashboard snapshot failed")
        return {"t": time.time(), "errors": [BUILD_FAILED]}


async def end_event_streams(app: web.Application) -> None:
    """The app's on_shutdown: aiohttp would otherwise wait for streams that never end by themselves."""
    await app[EVENT_STREAMS].shut_down()


@routes.get("/api/events")
async def events(request: web.Request) -> web.StreamResponse:
    account = await account_or_admin(request)  # 401 before any stream starts
    streams = request.app[EVENT_STREAMS]
    settings = streams.settings
    if request.transport is None:  # the client left already
        raise ApiError(CLIENT_CLOSED_REQUEST, "client_closed_request", "the client closed the connection")
    with streams.opened(account.id if account is not None else ADMIN, request.transport):
        response = web.StreamResponse(headers=HEADERS)
        response.content_type = "text/event-stream"
        await response.prepare(request)
        snapshots = DashboardSnapshots(request, account)
        client = _Client(request, response, settings.stall_s)
        while not client.gone:
            if not await client.send(sse_event("snapshot", await _snapshot(snapshots))):
                break
            if time.monotonic() - client.last_write >= settings.keepalive_s and not await client.send(
                b": keepalive\n\n"
            ):
                break
            try:
                async with asyncio.timeout(settings.interval_s):
                    await streams.shutting_down.wait()
                break  # the server is shutting down
            except TimeoutError:
                pass
    return response
