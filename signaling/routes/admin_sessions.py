"""GET /api/admin/sessions: every session on the node answering, for the operator's view on every
node (a node's dashboard asks the others for theirs: operator_sessions.py)."""

from __future__ import annotations

from aiohttp import web

from signaling.app_keys import CLUSTER
from signaling.auth import require_admin
from signaling.operator_sessions import sessions_here

routes = web.RouteTableDef()


@routes.get("/api/admin/sessions")
async def list_node_sessions(request: web.Request) -> web.Response:
    require_admin(request)
    return web.json_response({"node_id": request.app[CLUSTER].id, "sessions": sessions_here(request.app)})
