"""WHIP ingest (RFC 9725): OBS and other WHIP clients publish a camera under a stream name.

POST /whip/{stream} takes the offer as application/sdp and answers 201 with the SDP answer, the
session's URL (Location), an ETag for its ICE session and the configured ICE servers (Link); PATCH
on that URL trickles candidates; DELETE ends the session. The rest is /api/offer's: the same
account, metering, checks and errors.
"""

from __future__ import annotations

from aiohttp import web

from quota.errors import NothingToSpend
from quota.stream_meter import stream_meters
from signaling.app_keys import ACCOUNTS, CLUSTER, FACES, LATE_RETURNS, SESSIONS, SETTINGS
from signaling.auth import current_account
from signaling.cluster.routing import end_publication_elsewhere, place_new_session, redirect_to_owner
from signaling.errors import ApiError
from signaling.webrtc_http import SDP, created, etag, offer_text, stream_name, trickle
from stream.errors import UnsupportedCodec
from stream.offer_check import checked_offer
from stream.published_streams import Publication
from stream.session import Session
from stream.swap_options import SWAP_KEYS, checked_swap_options

routes = web.RouteTableDef()

QUERY_OPTIONS = ("face_id", *SWAP_KEYS)  # what /api/offer takes as face_id and options


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


def _etag(publication: Publication) -> str:
    return etag(publication.session_id, publication.ice_ufrag, publication.ice_pwd)


def _published_session(request: web.Request, account_id: str) -> tuple[Session, Publication]:
    """The session at this URL: 404 for an unknown one or one of another stream, 403 another account's."""
    sessions = request.app[SESSIONS]
    stream, session_id = stream_name(request), request.match_info["session_id"]
    session = sessions.get(session_id, account_id)
    publication = sessions.streams.of_session(session_id)
    if publication is None or publication.name != stream:
        raise ApiError(404, "session_not_found", f"no session {session_id!r} publishes the stream {stream!r}")
    return session, publication


@routes.route("OPTIONS", "/whip/{stream}")
async def whip_options(request: web.Request) -> web.Response:
    stream_name(request)
    return web.Response(status=204, headers={"Accept-Post": SDP, "Allow": "OPTIONS, POST"})


@routes.post("/whip/{stream}")
async def publish(request: web.Request) -> web.Response:
    account = await current_account(request)  # before the body: no key, no buffer
    stream = stream_name(request)
    await place_new_session(request)  # 307 to a better node (RFC 9725 section 4.5)
    face_id, options = _query_options(request)
    offer_sdp = await offer_text(request)
    await request.app[FACES].fetch_named(account.id, face_id, options.get("reference_face_id"))  # from another node
    if face_id is not None:
        request.app[FACES].get(face_id, account.id)  # 404/403 before any negotiation work
    options = checked_swap_options(options, request.app[FACES], account.id)
    quota = request.app[SETTINGS].quota
    make_meter = stream_meters(
        request.app[ACCOUNTS].store, account.id, quota.tier(account.tier), quota, request.app[LATE_RETURNS]
    )
    # before any publisher of the name is replaced, here or on another node: a node that takes no
    # session, an offer that cannot be answered, or an account with nothing to spend leave it alone
    request.app[SESSIONS].refuse_if_draining()
    try:
        checked_offer(offer_sdp, request.app[SETTINGS].stream.ice)
    except UnsupportedCodec as exc:  # well formed, but nothing we can decode: the client must change its encoder
        raise ApiError(422, exc.code, str(exc)) from exc
    if not request.app[SETTINGS].local_mode and (await request.app[ACCOUNTS].get(account.id)).balance <= 0:
        raise NothingToSpend("no tokens left: add tokens before publishing")
    await end_publication_elsewhere(request, account.id, stream)
    try:
        session, answer = await request.app[SESSIONS].open(
            offer_sdp, face_id=face_id, options=options, account_id=account.id, make_meter=make_meter, stream=stream
        )
    except UnsupportedCodec as exc:  # well formed, but nothing we can decode: the client must change its encoder
        raise ApiError(422, exc.code, str(exc)) from exc
    publication = request.app[SESSIONS].streams.of_session(session.id)
    if publication is None:  # ended (a newer publisher, a DELETE) before its answer left
        raise ApiError(409, "session_closed", f"the session was closed ({session.close_reason}) before it was answered")
    await request.app[CLUSTER].session_opened(session)
    response = created(answer, f"/whip/{stream}/{session.id}", _etag(publication), request)
    response.headers["X-Facefuse-Session"] = session.id
    return response


@routes.patch("/whip/{stream}/{session_id}")
async def whip_trickle(request: web.Request) -> web.Response:
    """Trickled candidates and end-of-candidates; an ICE restart is refused (aiortc cannot restart)."""
    account = await current_account(request)
    await redirect_to_owner(request, request.match_info["session_id"])
    session, publication = _published_session(request, account.id)
    return await trickle(
        request, _etag(publication), publication.ice_ufrag, publication.ice_pwd, session.add_remote_candidates
    )


@routes.delete("/whip/{stream}/{session_id}")
async def unpublish(request: web.Request) -> web.Response:
    account = await current_account(request)
    ended = request.app[SESSIONS].recently_ended.find(
        request.match_info["session_id"], account.id, stream_name(request)
    )
    if ended is not None:  # the client closed its connection first, and the session ended with it
        return web.json_response(ended)
    await redirect_to_owner(request, request.match_info["session_id"])
    session, _ = _published_session(request, account.id)
    await request.app[SESSIONS].close(session.id, "ended by its WHIP client", account_id=account.id)
    await request.app[CLUSTER].session_closed(session)
    return web.json_response(session.snapshot())
