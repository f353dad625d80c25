"""Waiting for work a bounded time, without waiting on its cancellation.

`asyncio.wait_for` and `asyncio.timeout` cancel the work at the deadline and then wait for it to
end: work that ignores its cancellation (a library's task that catches it, a close stuck in a
transport) holds the caller for good. Closing a session and shutting down must end, so their
steps run as tasks of their own, and one past its time is cancelled and left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable

logger = logging.getLogger(__name__)


async def finished_within(work: Awaitable[object], limit_s: float) -> bool:
    """Runs `work`; True when it ended within `limit_s` (its exception, if any, is raised here).
    False when it did not: it is cancelled and not waited for. Cancelling the caller cancels it."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=limit_s)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_forget)
        return False
    task.result()
    return True


def _forget(task: asyncio.Task[object]) -> None:
    """A task left behind may still fail as it ends: noted, not reported as never retrieved."""
    with contextlib.suppress(asyncio.CancelledError):
        if task.exception() is not None:
            logger.debug("work left behind ended with %r", task.exception())
