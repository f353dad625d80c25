"""GET /api/sessions/{id}/still: a small JPEG of the session's newest processed frame, for the
dashboard's card of a session not published under a stream name (no WHEP preview to play).

Encoded only when someone asks, off the event loop: the frame path itself never pays for it."""

from __future__ import annotations

import asyncio

import av
from aiohttp import web

from pipeline.identity.thumbnail import encode_jpeg
from signaling.app_keys import SESSIONS
from signaling.auth import current_account
from signaling.cluster.routing import forwarded_to_owner
from signaling.errors import ApiError

routes = web.RouteTableDef()

# The widest a still is (docs/api.md): a dashboard card shows it small; 320x180 is about 10 KB.
STILL_MAX_WIDTH = 320


def still_jpeg(frame: av.VideoFrame) -> bytes:
    """The frame at most STILL_MAX_WIDTH wide, its aspect kept, as a JPEG (even sides, as 4:2:0 wants)."""
    width = min(STILL_MAX_WIDTH, frame.width)
    height = max(2, round(frame.height * width / frame.width))
    width, height = width - width % 2, height - height % 2
    return encode_jpeg(frame.reformat(width=width, height=height, format="rgb24").to_ndarray())


@routes.get("/api/sessions/{session_id}/still")
async def get_still(request: web.Request) -> web.Response:
    account = await current_account(request)
    session_id = request.match_info["session_id"]
    if forwarded := await forwarded_to_owner(request, session_id):
        return forwarded
    frame = request.app[SESSIONS].get(session_id, account.id).latest_frame
    if frame is None:
        raise ApiError(404, "no_frame_yet", "the session has sent no video yet; ask again in a second")
    jpeg = await asyncio.to_thread(still_jpeg, frame)
    return web.Response(body=jpeg, content_type="image/jpeg", headers={"Cache-Control": "no-store"})
