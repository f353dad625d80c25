"""/api/streams: an account's stream names and the view tokens that play them.

A view token lets a viewer (OBS's Browser Source, a WHEP player) play one stream without the
account's API key ever going into a URL. Only the token's hash is kept: the token is in the
creating answer and nowhere after.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from aiohttp import web

from quota.store import ViewToken
from quota.view_tokens import ViewTokens, checked_stream_name
from signaling.app_keys import ACCOUNTS, CLUSTER, SESSIONS
from signaling.auth import current_account
from signaling.cluster.routing import streams_elsewhere
from signaling.revoked_viewers import REVOKED_REASON

routes = web.RouteTableDef()


def _view_tokens(request: web.Request) -> ViewTokens:
    return ViewTokens(request.app[ACCOUNTS].store)


def _describe(token: ViewToken) -> dict[str, Any]:
    return {"id": token.id, "stream": token.stream, "created_at": token.created_at}


@routes.get("/api/streams")
async def list_streams(request: web.Request) -> web.Response:
    """The account's streams on every node; a node that did not answer is named in unreachable_nodes."""
    account = await current_account(request)
    elsewhere, unreachable = await streams_elsewhere(request, account.id)
    body: dict[str, object] = {
        "streams": with_streams_elsewhere(await describe_streams(request, account.id), elsewhere)
    }
    if unreachable:
        body["unreachable_nodes"] = unreachable
    return web.json_response(body)


def with_streams_elsewhere(here: list[dict[str, Any]], elsewhere: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This node's list of the account's streams with those live on other nodes in their place
    (a name not live here may be live on another node: it is listed as it is there)."""
    by_name = {stream["stream"]: stream for stream in here}
    for stream in elsewhere:
        if not by_name.get(stream["stream"], {}).get("live"):
            by_name[stream["stream"]] = stream  # view tokens are counted in the store, the same on every node
    return [by_name[name] for name in sorted(by_name)]


async def describe_streams(request: web.Request, account_id: str) -> list[dict[str, Any]]:
    """The account's streams on this node: each name published here or holding view tokens; whether
    it is live, the session behind it, its node and its viewers (GET /api/streams, and the
    dashboard's events)."""
    sessions = request.app[SESSIONS]
    counts: dict[str, int] = {}
    for token in await _view_tokens(request).of_account(account_id):
        counts[token.stream] = counts.get(token.stream, 0) + 1
    live = {publication.name: publication.session_id for publication in sessions.streams.of_account(account_id)}
    streams = []
    for name in sorted(counts.keys() | live.keys()):
        session_id = live.get(name)
        viewers = sessions.viewers(session_id) if session_id is not None else []
        streams.append(
            {
                "stream": name,
                "live": session_id is not None,
                "session_id": session_id,
                "node_id": request.app[CLUSTER].id if session_id is not None else None,
                "viewers": [viewer.snapshot() for viewer in viewers],
                "view_tokens": counts.get(name, 0),
            }
        )
    return streams


@routes.post("/api/streams/{stream}/view-tokens")
async def create_view_token(request: web.Request) -> web.Response:
    account = await current_account(request)
    stream = checked_stream_name(request.match_info["stream"])
    token, secret = await _view_tokens(request).create(account.id, stream)
    body = {
        **_describe(token),
        "token": secret,
        # in the fragment: a browser sends no fragment to any server, so the token never reaches a log
        "watch_url": f"/watch/{stream}#token={quote(secret)}",
        "whep_url": f"/whep/{stream}",
    }
    return web.json_response(body, status=201, headers={"Location": f"/api/streams/{stream}/view-tokens/{token.id}"})


@routes.get("/api/streams/{stream}/view-tokens")
async def list_view_tokens(request: web.Request) -> web.Response:
    """Ids and creation times; never the tokens, which the store does not have."""
    account = await current_account(request)
    stream = checked_stream_name(request.match_info["stream"])
    tokens = await _view_tokens(request).of_account(account.id, stream)
    return web.json_response({"view_tokens": [_describe(token) for token in tokens]})


@routes.delete("/api/streams/{stream}/view-tokens/{token_id}")
async def revoke_view_token(request: web.Request) -> web.Response:
    account = await current_account(request)
    stream = checked_stream_name(request.match_info["stream"])
    token_id = request.match_info["token_id"]
    await _view_tokens(request).revoke(account.id, stream, token_id)  # another account's: 404, as unknown
    # its viewers here stop now; on other nodes, at their next sweep (signaling/revoked_viewers.py)
    closed = await request.app[SESSIONS].close_viewers_of_tokens({token_id}, REVOKED_REASON)
    return web.json_response({"id": token_id, "deleted": True, "viewers_closed": closed})
