"""WHEP playback (draft-ietf-wish-whep): a viewer plays the processed video and the audio of the
account's session published under a stream name (by WHIP, the camera page or /api/offer).

POST /whep/{stream} takes a recvonly offer as application/sdp and answers 201 with the answer,
the viewer's URL (Location), an ETag and the ICE servers (Link); PATCH trickles; DELETE ends it.
A view token of the stream (or the account's API key) is the credential. While nothing is
published under the name: 409 with Retry-After, so a player retries while OBS reconnects.
"""

from __future__ import annotations

from aiohttp import web

from signaling.app_keys import SESSIONS
from signaling.auth import view_token_stream
from signaling.cluster.routing import redirect_to_stream_holder
from signaling.errors import ApiError
from signaling.webrtc_http import SDP, created, etag, offer_text, stream_name, trickle
from stream.errors import StreamNotLive, TooManyViewers, UnsupportedCodec, ViewTokenViewersFull
from stream.viewer import Viewer

routes = web.RouteTableDef()

# How soon a player should ask again while nothing is published (OBS reconnects within seconds).
NOT_LIVE_RETRY_S = 1


def _etag(viewer: Viewer) -> str:
    return etag(viewer.id, viewer.ice_ufrag, viewer.ice_pwd)


async def _viewer(request: web.Request) -> Viewer:
    """The viewer at this URL, for a credential that may play its stream; 404 otherwise."""
    account_id, stream, _token_id = await view_token_stream(request)
    await redirect_to_stream_holder(request, account_id, stream)  # a viewer lives on its stream's node
    viewer_id = request.match_info["viewer_id"]
    viewer = request.app[SESSIONS].get_viewer(viewer_id, account_id)
    if viewer.stream != stream:
        raise ApiError(404, "viewer_not_found", f"no viewer {viewer_id!r} plays the stream {stream!r}")
    return viewer


@routes.route("OPTIONS", "/whep/{stream}")
async def whep_options(request: web.Request) -> web.Response:
    stream_name(request)
    return web.Response(status=204, headers={"Accept-Post": SDP, "Allow": "OPTIONS, POST"})


@routes.post("/whep/{stream}")
async def play(request: web.Request) -> web.Response:
    account_id, stream, token_id = await view_token_stream(request)  # before the body: no credential, no buffer
    await redirect_to_stream_holder(request, account_id, stream)
    offer_sdp = await offer_text(request)
    try:
        viewer, answer = await request.app[SESSIONS].open_viewer(
            offer_sdp, account_id=account_id, stream=stream, token_id=token_id
        )
    except StreamNotLive as exc:
        raise ApiError(409, exc.code, str(exc), {"Retry-After": str(NOT_LIVE_RETRY_S)}) from exc
    except ViewTokenViewersFull as exc:  # its holder's own limit: no point in retrying soon
        raise ApiError(429, exc.code, str(exc)) from exc
    except TooManyViewers as exc:
        raise ApiError(503, exc.code, str(exc), {"Retry-After": "10"}) from exc
    except UnsupportedCodec as exc:
        raise ApiError(422, exc.code, str(exc)) from exc
    response = created(answer, f"/whep/{stream}/{viewer.id}", _etag(viewer), request)
    response.headers["X-Facefuse-Viewer"] = viewer.id
    if token_id is None:  # the publisher's session id is the owner's to know, not a token holder's
        response.headers["X-Facefuse-Session"] = viewer.session.id
    return response


@routes.patch("/whep/{stream}/{viewer_id}")
async def whep_trickle(request: web.Request) -> web.Response:
    viewer = await _viewer(request)
    return await trickle(request, _etag(viewer), viewer.ice_ufrag, viewer.ice_pwd, viewer.add_remote_candidates)


@routes.delete("/whep/{stream}/{viewer_id}")
async def stop_playing(request: web.Request) -> web.Response:
    account_id, stream, token_id = await view_token_stream(request)
    ended = request.app[SESSIONS].recently_ended.find(request.match_info["viewer_id"], account_id, stream)
    if ended is None:  # else its connection (or its stream) ended first
        viewer = await _viewer(request)
        await viewer.close("ended by its WHEP client")
        ended = viewer.snapshot()
    if token_id is not None:  # as in the 201: the publisher's session id is not a token holder's to know
        ended = {key: value for key, value in ended.items() if key != "session_id"}
    return web.json_response(ended)
