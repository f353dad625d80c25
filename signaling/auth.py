"""Who is asking: the account behind `Authorization: Bearer <api key>`, the admin, or a viewer
of one stream holding a view token."""

from __future__ import annotations

import hmac
from typing import NamedTuple

from aiohttp import web

from quota.accounts import LOCAL_ACCOUNT
from quota.store import Account
from quota.view_tokens import ViewTokens, checked_stream_name, looks_like_view_token
from signaling.app_keys import ACCOUNTS, SETTINGS
from signaling.cluster.hops import ADMIN_CALLER, CALLER, NOBODY, hop_of
from signaling.errors import ApiError


def _bearer(request: web.Request) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthorized", "send 'Authorization: Bearer <api key>'", {"WWW-Authenticate": "Bearer"})
    if not token.isascii():  # keys are ASCII; other bytes arrive as surrogates that cannot be hashed
        raise ApiError(401, "unauthorized", "the API key is not valid", {"WWW-Authenticate": "Bearer"})
    return token.strip()


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, {"WWW-Authenticate": "Bearer"})


async def current_account(request: web.Request) -> Account:
    """The caller's account; in local mode (no admin key, loopback) the local account, without auth.
    A view token is never an account's credential (view-token hashes are not in the API-key index
    either); it is named here only to say what it is for."""
    accounts = request.app[ACCOUNTS]
    if request.app[SETTINGS].local_mode:
        return await accounts.get(LOCAL_ACCOUNT)
    if (hop := hop_of(request)) is not None:  # another node authenticated the caller (cluster/hops.py)
        if hop.caller in (ADMIN_CALLER, NOBODY):
            raise _unauthorized("the forwarding node vouched for no account")
        account = await accounts.get(hop.caller)
    else:
        api_key = _bearer(request)
        if looks_like_view_token(api_key):
            raise _unauthorized(
                "a view token only plays its one stream (WHEP, the watch page); the API needs an API key"
            )
        account = await accounts.authenticate(api_key)
    request[CALLER] = account.id
    return account


class PlayCredential(NamedTuple):
    account_id: str
    stream: str
    token_id: str | None  # the view token's id; None for the account's API key or local mode


async def view_token_stream(request: web.Request) -> PlayCredential:
    """Who may play the stream named by the route's `{stream}`, and with which view token.

    A view token, in `Authorization: Bearer` or in `?token=` (a Browser Source cannot set headers),
    plays only its own stream; an unknown or revoked one is 401, as is one of another stream. The
    account's API key plays the account's streams, from the header only: an API key never goes into
    a URL. In local mode no credential is needed; one that is given is still checked."""
    stream = checked_stream_name(request.match_info["stream"])
    in_header = "Authorization" in request.headers
    credential = _bearer(request) if in_header else request.query.get("token")
    if credential is None:
        if request.app[SETTINGS].local_mode:
            return PlayCredential(LOCAL_ACCOUNT, stream, None)
        raise _unauthorized("send 'Authorization: Bearer <view token>', or '?token=<view token>' in the URL")
    if not credential.isascii() or not looks_like_view_token(credential):
        if in_header:  # the account's API key
            return PlayCredential((await current_account(request)).id, stream, None)
        raise _unauthorized(
            "the token in the URL is not a view token: create one with POST /api/streams/{stream}/view-tokens"
        )
    view_token = await ViewTokens(request.app[ACCOUNTS].store).resolve(credential)
    if view_token.stream != stream:
        raise _unauthorized(f"this view token plays the stream {view_token.stream!r}, not {stream!r}")
    return PlayCredential(view_token.account_id, stream, view_token.id)


def require_admin(request: web.Request) -> None:
    admin_key = request.app[SETTINGS].quota.admin_key
    if admin_key is None:
        raise ApiError(403, "forbidden", "the admin API is off: start the server with --admin-key")
    if (hop := hop_of(request)) is not None:  # another node checked the admin key (cluster/hops.py)
        if hop.caller != ADMIN_CALLER:
            raise ApiError(
                401, "unauthorized", "the forwarding node vouched for no admin", {"WWW-Authenticate": "Bearer"}
            )
    elif not hmac.compare_digest(_bearer(request).encode(), admin_key.encode()):
        raise ApiError(401, "unauthorized", "the admin key is not valid", {"WWW-Authenticate": "Bearer"})
    request[CALLER] = ADMIN_CALLER
