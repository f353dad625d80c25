"""Who asks, where the admin key may stand in for an account: the operator's view reads every
session's events and ends any session with it."""

from __future__ import annotations

from aiohttp import web

from quota.store import Account
from signaling.auth import current_account, require_admin
from signaling.errors import ApiError


async def account_or_admin(request: web.Request) -> Account | None:
    """The caller's account; None for the admin key, which has none. 401 for neither."""
    try:
        require_admin(request)
    except ApiError:
        return await current_account(request)
    return None
