"""The pages a streamer opens besides the camera page: /watch/{stream} (a WHEP player for OBS's
Browser Source), /publish (a WHIP publisher in the browser) and /dashboard (the streamer's and the
operator's live view, docs/dashboard.md). Each is a static file; the page itself talks to the API,
so credentials stay in request headers."""

from __future__ import annotations

from aiohttp import web

from quota.view_tokens import checked_stream_name
from signaling.app_keys import SETTINGS

routes = web.RouteTableDef()


def _page(request: web.Request, name: str) -> web.FileResponse:
    # no-store: a Browser Source keeps a page for hours, and a cached old player would outlive an upgrade
    return web.FileResponse(request.app[SETTINGS].http.static_dir / name, headers={"Cache-Control": "no-store"})


@routes.get("/watch/{stream}")
async def watch(request: web.Request) -> web.FileResponse:
    checked_stream_name(request.match_info["stream"])  # 400 for a name no stream can have
    return _page(request, "watch.html")


@routes.get("/publish")
async def publish(request: web.Request) -> web.FileResponse:
    return _page(request, "publish.html")


@routes.get("/dashboard")
async def dashboard(request: web.Request) -> web.FileResponse:
    return _page(request, "dashboard.html")
