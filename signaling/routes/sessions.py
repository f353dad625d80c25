"""POST /api/offer and /api/sessions: opening, watching and ending sessions."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from quota.stream_meter import stream_meters
from signaling.app_keys import ACCOUNTS, CLUSTER, FACES, LATE_RETURNS, SESSIONS, SETTINGS
from signaling.auth import current_account
from signaling.caller import account_or_admin
from signaling.cluster.routing import (
    end_publication_elsewhere,
    forwarded_to_owner,
    place_new_session,
    sessions_elsewhere,
)
from signaling.errors import ApiError
from signaling.request_body import json_object
from stream.published_streams import STREAM_NAME_RULE, is_stream_name
from stream.sdp import MAX_SDP_CHARS
from stream.swap_options import checked_swap_options

routes = web.RouteTableDef()


def _parse_offer_body(body: dict[str, Any]) -> tuple[str, str | None, dict[str, object], str | None]:
    sdp, kind, face_id, options = body.get("sdp"), body.get("type"), body.get("face_id"), body.get("options", {})
    if kind != "offer":
        raise ApiError(400, "invalid_body", "'type' must be \"offer\"")
    if not isinstance(sdp, str) or not sdp.strip():
        raise ApiError(400, "invalid_sdp", "'sdp' must be a non-empty string")
    if len(sdp) > MAX_SDP_CHARS:
        raise ApiError(400, "invalid_sdp", f"'sdp' is longer than {MAX_SDP_CHARS} characters")
    if face_id is not None and not isinstance(face_id, str):
        raise ApiError(400, "invalid_body", "'face_id' must be a string")
    if not isinstance(options, dict):
        raise ApiError(400, "invalid_body", "'options' must be a JSON object")
    options = dict(options)
    stream = options.pop("stream", None)  # publishes the session under a name its viewers play (WHEP)
    if stream is not None and not (isinstance(stream, str) and is_stream_name(stream)):
        raise ApiError(400, "invalid_stream_name", f"options.stream must be a stream name: {STREAM_NAME_RULE}")
    return sdp, face_id, options, stream


@routes.post("/api/offer")
async def offer(request: web.Request) -> web.Response:
    account = await current_account(request)  # before the body: no key, no buffer
    await place_new_session(request)  # 307 to a better node: the client sends its body there
    sdp, face_id, options, stream = _parse_offer_body(await json_object(request, '{"sdp", "type": "offer"}'))
    await request.app[FACES].fetch_named(account.id, face_id, options.get("reference_face_id"))  # from another node
    if face_id is not None:
        request.app[FACES].get(face_id, account.id)  # 404/403 before any negotiation work
    options = checked_swap_options(options, request.app[FACES], account.id)  # 400 / 404 / 403 before negotiating
    quota = request.app[SETTINGS].quota
    make_meter = stream_meters(
        request.app[ACCOUNTS].store, account.id, quota.tier(account.tier), quota, request.app[LATE_RETURNS]
    )
    if stream is not None:
        await end_publication_elsewhere(request, account.id, stream)
    session, answer = await request.app[SESSIONS].open(
        sdp, face_id=face_id, options=options, account_id=account.id, make_meter=make_meter, stream=stream
    )
    await request.app[CLUSTER].session_opened(session)
    return web.json_response({"sdp": answer, "type": "answer", "session_id": session.id})


@routes.get("/api/sessions")
async def list_sessions(request: web.Request) -> web.Response:
    """The account's sessions on every node; a node that did not answer is named in unreachable_nodes."""
    account = await current_account(request)
    node_id = request.app[CLUSTER].id
    listed = [{**session.snapshot(), "node_id": node_id} for session in request.app[SESSIONS].all(account.id)]
    elsewhere, unreachable = await sessions_elsewhere(request, account.id)
    body: dict[str, object] = {"sessions": listed + elsewhere}
    if unreachable:
        body["unreachable_nodes"] = unreachable
    return web.json_response(body)


@routes.get("/api/sessions/{session_id}")
async def get_session(request: web.Request) -> web.Response:
    account = await current_account(request)
    if forwarded := await forwarded_to_owner(request, request.match_info["session_id"]):
        return forwarded
    return web.json_response(request.app[SESSIONS].get(request.match_info["session_id"], account.id).snapshot())


@routes.delete("/api/sessions/{session_id}")
async def delete_session(request: web.Request) -> web.Response:
    """Ends the session: the account's own, or any with the admin key (the operator's view)."""
    account = await account_or_admin(request)
    if forwarded := await forwarded_to_owner(request, request.match_info["session_id"]):
        return forwarded
    account_id = account.id if account is not None else None  # None: any account's
    session = await request.app[SESSIONS].close(request.match_info["session_id"], account_id=account_id)
    await request.app[CLUSTER].session_closed(session)
    return web.json_response(session.snapshot())


@routes.post("/api/sessions/{session_id}/face")
async def set_session_face(request: web.Request) -> web.Response:
    """Switches the session's source face mid-stream: {"face_id": "..."} (null: stop swapping)."""
    account = await current_account(request)
    if forwarded := await forwarded_to_owner(request, request.match_info["session_id"]):
        return forwarded
    session = request.app[SESSIONS].get(request.match_info["session_id"], account.id)
    body = await json_object(request, '{"face_id": "..."}')
    # a missing face_id is a typo, not "stop swapping": that takes an explicit null
    if "face_id" not in body or not (body["face_id"] is None or isinstance(body["face_id"], str)):
        raise ApiError(400, "invalid_body", 'expected {"face_id": "..."} (or null to stop swapping)')
    await request.app[FACES].fetch_named(account.id, body["face_id"])
    session.set_face(body.get("face_id"))
    return web.json_response(session.snapshot())


@routes.post("/api/sessions/{session_id}/swap")
async def set_session_swap(request: web.Request) -> web.Response:
    """Changes which faces the session swaps mid-stream: {"swap": "all" | "largest" | "reference",
    "reference_face_id"?, "reference_threshold"?}, as in an offer's options."""
    account = await current_account(request)
    if forwarded := await forwarded_to_owner(request, request.match_info["session_id"]):
        return forwarded
    session = request.app[SESSIONS].get(request.match_info["session_id"], account.id)
    shape = '{"swap": "all" | "largest" | "reference", "reference_face_id"?, "reference_threshold"?}'
    body = await json_object(request, shape)
    if "swap" not in body:
        raise ApiError(400, "invalid_body", f"expected {shape}")
    await request.app[FACES].fetch_named(account.id, body.get("reference_face_id"))
    session.set_swap(body["swap"], body.get("reference_face_id"), body.get("reference_threshold"))
    return web.json_response(session.snapshot())
