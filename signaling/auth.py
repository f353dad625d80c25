"""Who is asking: the account behind `Authorization: Bearer <api key>`, or the admin."""

from __future__ import annotations

import hmac

from aiohttp import web

from quota.accounts import LOCAL_ACCOUNT
from quota.store import Account
from signaling.app_keys import ACCOUNTS, SETTINGS
from signaling.errors import ApiError


def _bearer(request: web.Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthorized", "send 'Authorization: Bearer <api key>'", {"WWW-Authenticate": "Bearer"})
    if not token.isascii():  # keys are ASCII; other bytes arrive as surrogates that cannot be hashed
        raise ApiError(401, "unauthorized", "the API key is not valid", {"WWW-Authenticate": "Bearer"})
    return token.strip()


async def current_account(request: web.Request) -> Account:
    """The caller's account; in local mode (no admin key, loopback) the local account, without auth."""
    accounts = request.app[ACCOUNTS]
    if request.app[SETTINGS].local_mode:
        return await accounts.get(LOCAL_ACCOUNT)
    return await accounts.authenticate(_bearer(request))


def require_admin(request: web.Request) -> None:
    admin_key = request.app[SETTINGS].quota.admin_key
    if admin_key is None:
        raise ApiError(403, "forbidden", "the admin API is off: start the server with --admin-key")
    if not hmac.compare_digest(_bearer(request).encode(), admin_key.encode()):
        raise ApiError(401, "unauthorized", "the admin key is not valid", {"WWW-Authenticate": "Bearer"})
