"""POST /api/admin/nodes/{node_id}/drain: the admin drains a node (signaling/drain.py); asked of
any node, the request is forwarded to the node named (the operator reaches them all through one
address)."""

from __future__ import annotations

from aiohttp import web

from quota.settings import default_node_id
from signaling.app_keys import CLUSTER, DRAIN, SETTINGS
from signaling.auth import require_admin
from signaling.cluster.forwarding import forward, is_forwarded
from signaling.errors import ApiError

routes = web.RouteTableDef()

# The node answering, whatever its id: a preStop hook on the node itself need not know it.
THIS_NODE = "self"


def node_id(app: web.Application) -> str:
    settings = app[SETTINGS]
    return settings.quota.node_id or default_node_id(settings.http.port)


@routes.post("/api/admin/nodes/{node_id}/drain")
async def drain_node(request: web.Request) -> web.Response:
    require_admin(request)
    wanted = request.match_info["node_id"]
    if wanted not in (THIS_NODE, node_id(request.app)):
        cluster = request.app[CLUSTER]
        other = None if is_forwarded(request) else await cluster.other_node(wanted)
        if other is None:
            raise ApiError(404, "node_not_found", f"no live node {wanted!r} (this node is {node_id(request.app)!r})")
        return await forward(request, cluster, other, about="the sessions to drain")
    drain = request.app[DRAIN]
    began = drain.start()
    return web.json_response({"node_id": node_id(request.app), **drain.describe()}, status=202 if began else 200)
