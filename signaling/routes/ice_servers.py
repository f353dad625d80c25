"""GET /api/ice-servers: the STUN/TURN servers (--ice-server) a web page gives its
RTCPeerConnection before it makes an offer, so that a browser behind a strict NAT reaches the
server through TURN; WHIP and WHEP clients learn the same servers from the answer's Link headers."""

from __future__ import annotations

from aiohttp import web

from signaling.app_keys import SETTINGS
from signaling.auth import current_account
from stream.ice import ice_server

routes = web.RouteTableDef()


@routes.get("/api/ice-servers")
async def ice_servers(request: web.Request) -> web.Response:
    await current_account(request)  # TURN credentials only to those who may open a session
    listed = []
    for url in request.app[SETTINGS].stream.ice.servers:
        server = ice_server(url)  # the credentials split off the url, as the server itself uses them
        entry: dict[str, object] = {"urls": server.urls}
        if server.username is not None:
            entry.update(username=server.username, credential=server.credential or "")
        listed.append(entry)
    # as RTCConfiguration.iceServers has them; never cached: TURN credentials may be rotated
    return web.json_response({"ice_servers": listed}, headers={"Cache-Control": "no-store"})
