"""What WHIP (RFC 9725) and WHEP (draft-ietf-wish-whep) share over HTTP: the SDP body, the
stream name in the path, the ETag naming an ICE session, the ICE servers' Link headers, and
trickled candidates in a PATCH."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiortc import RTCIceCandidate

from signaling.app_keys import SETTINGS
from signaling.errors import ApiError
from signaling.request_body import JSON_BODY_TIMEOUT_S
from stream.errors import TooManyCandidates, TooManyPatches, TrickleTooLate
from stream.ice import allowed_remote_networks, ice_server
from stream.published_streams import STREAM_NAME_RULE, is_stream_name
from stream.sdp import MAX_SDP_CHARS, InvalidSdp
from stream.trickle import MAX_FRAGMENT_CHARS, parse_trickle_fragment

SDP = "application/sdp"
TRICKLE_FRAGMENT = "application/trickle-ice-sdpfrag"


def stream_name(request: web.Request) -> str:
    name = request.match_info["stream"]
    if not is_stream_name(name):
        raise ApiError(400, "invalid_stream_name", f"a stream name has {STREAM_NAME_RULE}, not {name[:80]!r}")
    return name


async def body_text(request: web.Request, content_type: str, max_chars: int) -> str:
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


async def offer_text(request: web.Request) -> str:
    return await body_text(request, SDP, MAX_SDP_CHARS)


def etag(resource_id: str, ice_ufrag: str, ice_pwd: str) -> str:
    """Strong, and names the ICE session: it would change with the credentials (an ICE restart)."""
    ice_session = f"{resource_id}:{ice_ufrag}:{ice_pwd}"
    return '"' + hashlib.sha256(ice_session.encode()).hexdigest()[:32] + '"'


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def ice_server_links(urls: tuple[str, ...]) -> list[str]:
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


def created(answer_sdp: str, location: str, resource_etag: str, request: web.Request) -> web.Response:
    """The 201 both protocols answer an offer with."""
    response = web.Response(status=201, body=answer_sdp.encode(), content_type=SDP)
    response.headers["Location"] = location
    response.headers["ETag"] = resource_etag
    for link in ice_server_links(request.app[SETTINGS].stream.ice.servers):
        response.headers.add("Link", link)
    return response


async def trickle(
    request: web.Request,
    resource_etag: str,
    ice_ufrag: str,
    ice_pwd: str,
    add_candidates: Callable[[list[RTCIceCandidate], bool], Awaitable[None]],
) -> web.Response:
    """A PATCH of trickled candidates and end-of-candidates (204); If-Match is required (428) and
    must name this ICE session (412); an ICE restart is refused (aiortc cannot restart)."""
    if_match = request.headers.get("If-Match")
    if if_match is None:
        raise ApiError(428, "precondition_required", "send If-Match with the ETag the POST answered")
    text = await body_text(request, TRICKLE_FRAGMENT, MAX_FRAGMENT_CHARS)
    if not if_match_holds(if_match, resource_etag):
        raise ApiError(412, "precondition_failed", "If-Match is not this session's ETag: the ICE session has changed")
    try:
        fragment = parse_trickle_fragment(text, allowed_remote_networks(request.app[SETTINGS].stream.ice))
    except InvalidSdp as exc:
        raise ApiError(400, "invalid_sdp", str(exc)) from exc
    restart = (fragment.ice_ufrag is not None and fragment.ice_ufrag != ice_ufrag) or (
        fragment.ice_pwd is not None and fragment.ice_pwd != ice_pwd
    )
    if restart:
        raise ApiError(
            422, "ice_restart_unsupported", "this server cannot restart ICE: end the session (DELETE) and start again"
        )
    try:
        await add_candidates(fragment.candidates, fragment.end)
    except TooManyCandidates as exc:
        raise ApiError(400, exc.code, str(exc)) from exc
    except TooManyPatches as exc:
        raise ApiError(429, exc.code, str(exc)) from exc
    except TrickleTooLate as exc:
        raise ApiError(409, exc.code, str(exc)) from exc
    return web.Response(status=204, headers={"ETag": resource_etag})


def if_match_holds(if_match: str, resource_etag: str) -> bool:
    """RFC 9110 13.1.1: `*`, or a comma-separated list of entity tags one of which is this one
    (strong comparison: a weak tag never matches)."""
    tags = [tag.strip() for tag in if_match.split(",")]
    return "*" in tags or resource_etag in tags
