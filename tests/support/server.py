"""Shared test helpers: an in-process server on a free port (and, re-exported, the photos and free ports)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import subprocess
import time
from collections.abc import AsyncIterator

from aiohttp import web

from client.facefuse_client import ClientSession, FacefuseClient
from client.image_track import ImageTrack
from pipeline.settings import PipelineSettings
from quota.settings import QuotaSettings
from signaling.app import create_app
from signaling.settings import ServerSettings
from signaling.tls import server_tls
from stream.ice import IceSettings
from stream.session import Session
from stream.settings import StreamSettings
from support.photos import FACES_DIR, PACKAGED_FACES, PEOPLE, REPO_ROOT, face_path, face_rgb  # noqa: F401  (re-exported)
from support.ports import free_port  # noqa: F401  (re-exported)


async def wait_until(predicate, timeout: float, step: float = 0.05) -> None:
    """Polls `predicate` on the event loop until it holds; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met within {timeout} s"
        await asyncio.sleep(step)


async def wait_healthy(client: FacefuseClient, process: subprocess.Popen, timeout: float = 30) -> None:
    """Until a `facefuse serve` process answers /healthz; fails with its output if it exits first."""
    deadline = time.monotonic() + timeout
    while True:
        assert process.poll() is None, process.communicate()[0]
        try:
            await client.request("GET", "/healthz")
            return
        except OSError:
            assert time.monotonic() < deadline, "the server did not become healthy"
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def running_server(settings: ServerSettings) -> AsyncIterator[tuple[str, web.Application]]:
    """The real app on 127.0.0.1 and a free port, in this event loop; yields (base_url, app).
    HTTPS when the settings ask for it (--tls-cert or --tls-self-signed), as `facefuse serve` does."""
    tls = server_tls(settings.http)
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls.context if tls else None)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}", app
    finally:
        await runner.cleanup()


@dataclasses.dataclass
class LiveSession:
    """One client's session on an in-process server, its frames coming back."""

    app: web.Application
    client: FacefuseClient
    session: ClientSession

    @property
    def server_session(self) -> Session:
        from signaling.app_keys import SESSIONS

        return self.app[SESSIONS].get(self.session.session_id)


@contextlib.asynccontextmanager
async def one_live_session(frames: int = 3) -> AsyncIterator[LiveSession]:
    """A loopback server (passthrough chain) and one client streaming obama.jpg at 320x240, once
    its first `frames` frames came back."""
    async with running_server(loopback_settings()) as (url, app):
        async with FacefuseClient(url) as client:
            session = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            await wait_until(lambda: session.frames_received >= frames, timeout=10)
            yield LiveSession(app, client, session)


def loopback_settings(
    chain: str = "passthrough",
    *,
    stream: dict[str, object] | None = None,
    quota: dict[str, object] | None = None,
    **pipeline: object,
) -> ServerSettings:
    """Server settings for tests: media on 127.0.0.1 only, CPU; local mode unless quota says otherwise."""
    return ServerSettings(
        stream=StreamSettings(ice=IceSettings(hosts=("127.0.0.1",)), **(stream or {})),
        pipeline=dataclasses.replace(PipelineSettings(chain=chain, device="cpu"), **pipeline),
        quota=QuotaSettings(**(quota or {})),
    )
