"""A small aiohttp app of a test's own (a stand-in for another node, a capture point) served on
127.0.0.1 at a free port for the length of a with-block."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web


@contextlib.asynccontextmanager
async def app_on_loopback(app: web.Application) -> AsyncIterator[str]:
    """Yields the app's base URL (http://127.0.0.1:PORT)."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
