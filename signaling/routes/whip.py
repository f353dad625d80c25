"""WHIP ingest (RFC 9725): OBS and other WHIP clients publish a camera under a stream name.

POST /whip/{stream} takes the offer as application/sdp and answers 201 with the SDP answer, the
session's URL (Location), an ETag for its ICE session and the configured ICE servers (Link); PATCH
on that URL trickles candidates; DELETE ends the session. The rest is /api/offer's: the same
account, metering, checks and errors.
"""

from __future__ import annotations

import asyncio
import hashlib

from aiohttp import web

from quota.stream_meter import stream_meters
from signaling.app_keys import ACCOUNTS, FACES, LATE_RETURNS, SESSIONS, SETTINGS
from signaling.auth import current_account
from signaling.errors import ApiError
from signaling.request_body import JSON_BODY_TIMEOUT_S
from stream.errors import UnsupportedCodec
from stream.ice import allowed_remote_networks, ice_server
from stream.published_streams import STREAM_NAME_RULE, Publication, is_stream_name
from stream.sdp import MAX_SDP_CHARS, InvalidSdp
from stream.session import Session
from stream.swap_options import SWAP_KEYS, checked_swap_options
from stream.trickle import MAX_FRAGMENT_CHARS, parse_trickle_fragment

routes = web.RouteTableDef()

SDP = "application/sdp"
TRICKLE_FRAGMENT = "application/trickle-ice-sdpfrag"
QUERY_OPTIONS = ("face_id", *SWAP_KEYS)  # what /api/offer takes as face_id and options


def _stream_name(request: web.Request) -> str:
    name = request.match_info["stream"]
    if not is_stream_name(name):
        raise ApiError(400, "invalid_stream_name", f"a stream name has {STREAM_NAME_RULE}, not {name[:80]!r}")
    return name


def _query_options(request: web.Request) -> tuple[str | None, dict[str, object]]:
    """The session's face and options from the query, as /api/offer's face_id and options."""
    for key in request.query:
        if key not in QUERY_OPTIONS:
            raise ApiError(
                400,
                "invalid_query",
                f"unknown query parameter {key[:40]!r}; the parameters are {', '.join(QUERY_OPTIONS)}",
            )
        if len(request.query.getall(key)) > 1:
            raise ApiError(400, "invalid_query", f"the query parameter {key!r} is given more than once")
    options: dict[str, object] = {key: request.query[key] for key in SWAP_KEYS if key in request.query}
    if "reference_threshold" in options:
        try:
            options["reference_threshold"] = float(request.query["reference_threshold"])
        except ValueError:
            raise ApiError(400, "invalid_query", "reference_threshold must be a number between 0 and 1") from None
    return request.query.get("face_id"), options


async def _body_text(request: web.Request, content_type: str, max_chars: int) -> str:
    if request.content_type != content_type:
        raise ApiError(
            415,
            "unsupported_media_type",
            f"send the body as Content-Type: {content_type}, not {request.content_type[:60]!r}",
        )
    try:
        async with asyncio.timeout(JSON_BODY_TIMEOUT_S):  # a body that stops arriving must not hold its buffer
            body = await request.read()
    except TimeoutError:
        raise ApiError(408, "request_timeout", f"the body did not arrive within {JSON_BODY_TIMEOUT_S:g} s") from None
    if len(body) > max_chars:
        raise ApiError(400, "invalid_sdp", f"the body is longer than {max_chars} characters")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "invalid_sdp", "the body is not UTF-8 text") from None


def _etag(publication: Publication) -> str:
    """Strong, and names the ICE session: it would change with the credentials (an ICE restart)."""
    ice_session = f"{publication.session_id}:{publication.ice_ufrag}:{publication.ice_pwd}"
    return '"' + hashlib.sha256(ice_session.encode()).hexdigest()[:32] + '"'


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ice_server_links(urls: tuple[str, ...]) -> list[str]:
    """RFC 9725's Link headers: the client may use the same STUN/TURN servers as the server."""
    links = []
    for url in urls:
        server = ice_server(url)  # credentials split off the url, as the server itself uses them
        link = f'<{server.urls}>; rel="ice-server"'
        if server.username is not None:
            link += f"; username={_quoted(server.username)}; credential={_quoted(server.credential or '')}"
            link += '; credential-type="password"'
        links.append(link)
    return links


def _published_session(request: web.Request, account_id: str) -> tuple[Session, Publication]:
    """The session at this URL: 404 for an unknown one or one of another stream, 403 another account's."""
    sessions = request.app[SESSIONS]
    stream, session_id = _stream_name(request), request.match_info["session_id"]
    session = sessions.get(session_id, account_id)
    publication = sessions.streams.of_session(session_id)
    if publication is None or publication.name != stream:
        raise ApiError(404, "session_not_found", f"no session {session_id!r} publishes the stream {stream!r}")
    return session, publication


@routes.route("OPTIONS", "/whip/{stream}")
async def whip_options(request: web.Request) -> web.Response:
    _stream_name(request)
    return web.Response(status=204, headers={"Accept-Post": SDP, "Allow": "OPTIONS, POST"})


@routes.post("/whip/{stream}")
async def publish(request: web.Request) -> web.Response:
    account = await current_account(request)  # before the body: no key, no buffer
    stream = _stream_name(request)
    face_id, options = _query_options(request)
    offer_sdp = await _body_text(request, SDP, MAX_SDP_CHARS)
    if face_id is not None:
        request.app[FACES].get(face_id, account.id)  # 404/403 before any negotiation work
    options = checked_swap_options(options, request.app[FACES], account.id)
    quota = request.app[SETTINGS].quota
    make_meter = stream_meters(
        request.app[ACCOUNTS].store, account.id, quota.tier(account.tier), quota, request.app[LATE_RETURNS]
    )
    try:
        session, answer = await request.app[SESSIONS].open(
            offer_sdp, face_id=face_id, options=options, account_id=account.id, make_meter=make_meter, stream=stream
        )
    except UnsupportedCodec as exc:  # well formed, but nothing we can decode: the client must change its encoder
        raise ApiError(422, exc.code, str(exc)) from exc
    publication = request.app[SESSIONS].streams.of_session(session.id)
    if publication is None:  # ended (a newer publisher, a DELETE) before its answer left
        raise ApiError(409, "session_closed", f"the session was closed ({session.close_reason}) before it was answered")
    response = web.Response(status=201, body=answer.encode(), content_type=SDP)
    response.headers["Location"] = f"/whip/{stream}/{session.id}"
    response.headers["ETag"] = _etag(publication)
    response.headers["X-Facefuse-Session"] = session.id
    for link in _ice_server_links(request.app[SETTINGS].stream.ice.servers):
        response.headers.add("Link", link)
    return response


@routes.patch("/whip/{stream}/{session_id}")
async def trickle(request: web.Request) -> web.Response:
    """Trickled candidates and end-of-candidates; an ICE restart is refused (aiortc cannot restart)."""
    account = await current_account(request)
    session, publication = _published_session(request, account.id)
    if_match = request.headers.get("If-Match")
    if if_match is None:
        raise ApiError(428, "precondition_required", "send If-Match with the ETag the POST answered")
    text = await _body_text(request, TRICKLE_FRAGMENT, MAX_FRAGMENT_CHARS)
    if if_match.strip() not in ("*", _etag(publication)):
        raise ApiError(412, "precondition_failed", "If-Match is not this session's ETag: the ICE session has changed")
    try:
        fragment = parse_trickle_fragment(text, allowed_remote_networks(request.app[SETTINGS].stream.ice))
    except InvalidSdp as exc:
        raise ApiError(400, "invalid_sdp", str(exc)) from exc
    restart = (fragment.ice_ufrag is not None and fragment.ice_ufrag != publication.ice_ufrag) or (
        fragment.ice_pwd is not None and fragment.ice_pwd != publication.ice_pwd
    )
    if restart:
        raise ApiError(
            422, "ice_restart_unsupported", "this server cannot restart ICE: end the session (DELETE) and publish again"
        )
    await session.add_remote_candidates(fragment.candidates, fragment.end)
    return web.Response(status=204, headers={"ETag": _etag(publication)})


@routes.delete("/whip/{stream}/{session_id}")
async def unpublish(request: web.Request) -> web.Response:
    account = await current_account(request)
    session, _ = _published_session(request, account.id)
    await request.app[SESSIONS].close(session.id, "ended by its WHIP client", account_id=account.id)
    return web.json_response(session.snapshot())
