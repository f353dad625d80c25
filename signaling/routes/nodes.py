"""GET /api/admin/nodes: the live nodes sharing this node's Redis, as their heartbeats last said."""

from __future__ import annotations

from aiohttp import web

from signaling.app_keys import CLUSTER
from signaling.auth import require_admin

routes = web.RouteTableDef()


@routes.get("/api/admin/nodes")
async def list_nodes(request: web.Request) -> web.Response:
    require_admin(request)
    cluster = request.app[CLUSTER]
    nodes = await cluster.live_nodes()
    return web.json_response({"node_id": cluster.id, "nodes": [node.describe() for node in nodes]})
