"""GET /api/account and the admin endpoints for accounts."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from quota.settings import MAX_AMOUNT_TOKENS, micro_amount, to_tokens
from quota.store import Account
from signaling.app_keys import ACCOUNTS, SESSIONS, SETTINGS
from signaling.auth import current_account, require_admin
from signaling.errors import ApiError
from signaling.request_body import json_object

routes = web.RouteTableDef()


def describe(request: web.Request, account: Account) -> dict[str, Any]:
    rules = request.app[SETTINGS].quota.tier(account.tier)
    sessions = request.app[SESSIONS].all(account.id)
    return {
        "id": account.id,
        "tier": account.tier,
        "balance": to_tokens(account.balance),
        "hourly_spend": to_tokens(account.hour_used),
        "hourly_cap": rules.hourly_cap,
        "metered": rules.metered,
        "max_sessions": rules.max_sessions,
        "active_sessions": len(sessions),  # on this node
        "burn_rate": round(sum(s.meter.burn_rate for s in sessions if s.meter is not None), 4),
    }


async def history(request: web.Request, account: Account) -> list[dict[str, Any]]:
    """The account's last 100 credits and sessions, newest first, with amounts in tokens."""
    entries = await request.app[ACCOUNTS].store.history(account.id, limit=100)
    for entry in entries:
        for field in ("amount", "spent"):
            if field in entry:
                entry[field] = to_tokens(entry[field])
    return entries


@routes.get("/api/account")
async def get_account(request: web.Request) -> web.Response:
    return web.json_response(describe(request, await current_account(request)))


@routes.get("/api/account/history")
async def get_account_history(request: web.Request) -> web.Response:
    """The caller's own account as the admin's GET /api/admin/accounts/{id} shows it."""
    account = await current_account(request)
    return web.json_response({**describe(request, account), "history": await history(request, account)})


@routes.post("/api/admin/accounts")
async def create_account(request: web.Request) -> web.Response:
    require_admin(request)
    body = await json_object(request)
    account, api_key = await request.app[ACCOUNTS].create(
        body.get("id"), body.get("tier", "free"), body.get("balance", 0)
    )
    return web.json_response({**describe(request, account), "api_key": api_key}, status=201)


@routes.get("/api/admin/accounts/{account_id}")
async def admin_get_account(request: web.Request) -> web.Response:
    require_admin(request)
    accounts = request.app[ACCOUNTS]
    account = await accounts.get(request.match_info["account_id"])
    return web.json_response({**describe(request, account), "history": await history(request, account)})


@routes.post("/api/admin/accounts/{account_id}/credit")
async def credit_account(request: web.Request) -> web.Response:
    require_admin(request)
    body = await json_object(request)
    amount, key = body.get("amount"), body.get("idempotency_key")
    micro = micro_amount(amount)
    if not micro:  # None, or under a micro-token: nothing to credit, and the key would be used up
        raise ApiError(400, "invalid_body", f"'amount' must be a number from 0.000001 to {MAX_AMOUNT_TOKENS:,}")
    if not isinstance(key, str) or not 1 <= len(key) <= 200 or not _is_utf8(key):
        raise ApiError(400, "invalid_body", "'idempotency_key' must be a string of 1-200 characters")
    accounts = request.app[ACCOUNTS]
    await accounts.store.credit(request.match_info["account_id"], micro, key)
    return web.json_response(describe(request, await accounts.get(request.match_info["account_id"])))


def _is_utf8(text: str) -> bool:
    """False for a lone surrogate (JSON's "\\ud800"): Redis could not store it; the memory store could."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
