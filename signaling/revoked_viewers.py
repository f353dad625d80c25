"""A revoked view token stops playing on every node.

The node the owner revokes it through closes its own viewers of it at once (routes/streams.py).
Viewers live on their stream's node, which may be another: each node also looks every SWEEP_S at
the view tokens its viewers play with, one store read per account, and closes the viewers whose
token is gone. While the store does not answer, viewers go on (they are not metered).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from quota.errors import StoreUnavailable
from quota.store import QuotaStore
from signaling.app_keys import ACCOUNTS, SESSIONS
from stream.manager import SessionManager

logger = logging.getLogger(__name__)

REVOKED_REASON = "its view token was revoked"
# How soon a token revoked through another node stops its viewers here.
SWEEP_S = 2.0


async def close_revoked_viewers(sessions: SessionManager, store: QuotaStore) -> int:
    """Closes this node's viewers whose view token the store no longer has; how many."""
    by_account: dict[str, set[str]] = {}
    for viewer in sessions.viewers():
        if viewer.token_id is not None and viewer.account_id is not None:
            by_account.setdefault(viewer.account_id, set()).add(viewer.token_id)
    revoked: set[str] = set()
    for account_id, token_ids in by_account.items():
        revoked |= token_ids - {token.id for token in await store.view_tokens(account_id)}
    return await sessions.close_viewers_of_tokens(revoked, REVOKED_REASON) if revoked else 0


async def _sweep(app: web.Application) -> None:
    while True:
        await asyncio.sleep(SWEEP_S)
        try:
            await close_revoked_viewers(app[SESSIONS], app[ACCOUNTS].store)
        except StoreUnavailable as exc:
            logger.warning("could not check the viewers' view tokens: %s", exc)


async def revoked_viewers(app: web.Application) -> AsyncIterator[None]:
    """The app's cleanup context: the sweep runs while the app does."""
    task = asyncio.ensure_future(_sweep(app))
    task.set_name("revoked-viewers")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
