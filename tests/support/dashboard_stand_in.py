"""A stand-in for the server's dashboard event stream (/api/events, docs/api.md "Dashboard events"),
serving the real page's files: the test queues each snapshot the page gets, ends the stream when
it likes, and refuses the key from some moment on. For what a real server cannot be made to show on
a 2-core machine (50 live sessions, an hour of snapshots in seconds). Runs in a LoopThread, driven
from a selenium test's blocking code."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator

from aiohttp import web

from support.loop_thread import LoopThread
from support.photos import REPO_ROOT

KEY = "key-of-the-stand-in"
REFUSED = {"error": {"code": "unauthorized", "message": "the API key is not valid"}}


class _StandInApp:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict | None] = asyncio.Queue()  # None ends the stream being sent
        self.accepting = True
        self.connections = 0
        self.open_streams = 0
        app = web.Application()
        app.router.add_get("/dashboard", self.page)
        app.router.add_static("/static/", REPO_ROOT / "static")
        app.router.add_get("/healthz", self.health)
        app.router.add_get("/api/events", self.events)
        self.runner = web.AppRunner(app)

    async def start(self) -> str:
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{self.runner.addresses[0][1]}"

    async def page(self, request: web.Request) -> web.FileResponse:
        return web.FileResponse(REPO_ROOT / "static" / "dashboard.html")

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"local_account": False})

    async def events(self, request: web.Request) -> web.StreamResponse:
        if not self.accepting or request.headers.get("Authorization") != f"Bearer {KEY}":
            return web.json_response(REFUSED, status=401, headers={"WWW-Authenticate": "Bearer"})
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        await response.prepare(request)
        self.connections += 1
        self.open_streams += 1
        try:
            while (data := await self.queue.get()) is not None:
                await response.write(f"event: snapshot\ndata: {json.dumps(data)}\n\n".encode())
        finally:
            self.open_streams -= 1
        return response

    async def send(self, snapshots: tuple[dict | None, ...]) -> None:
        for data in snapshots:
            self.queue.put_nowait(data)

    async def stop(self) -> None:
        for _ in range(self.open_streams):
            self.queue.put_nowait(None)
        await self.runner.cleanup()


async def _new_app() -> _StandInApp:
    return _StandInApp()  # made on the thread's loop, which its queue belongs to


class StandIn:
    """The stand-in as a test uses it: base_url, send(), end_stream(), refuse_key()."""

    def __init__(self, thread: LoopThread) -> None:
        self._thread = thread
        self._app: _StandInApp = thread.run(_new_app())
        self.base_url: str = thread.run(self._app.start())

    def send(self, *snapshots: dict) -> None:
        self._thread.run(self._app.send(snapshots))

    def end_stream(self) -> None:
        """Ends the stream being sent, as a server restarting or a proxy timing out would."""
        self._thread.run(self._app.send((None,)))

    def refuse_key(self) -> None:
        """From now on the key is refused (401), as when it is revoked or its account deleted."""
        self._app.accepting = False

    @property
    def connections(self) -> int:
        return self._app.connections

    def stop(self) -> None:
        self._thread.run(self._app.stop())


@contextlib.contextmanager
def stand_in() -> Iterator[StandIn]:
    thread = LoopThread()
    try:
        server = StandIn(thread)
        try:
            yield server
        finally:
            server.stop()
    finally:
        thread.close()
