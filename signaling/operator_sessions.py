"""The operator's list of sessions: every session on this node with its node and its share of the
batches, and every session on the other nodes sharing the Redis, each node asked in parallel
(GET /api/admin/sessions) with a short bound. A node that does not answer is named, not waited for."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from signaling.app_keys import CLUSTER, RUNNER, SESSIONS
from signaling.cluster.node_registry import NodeRecord
from signaling.cluster.routing import sessions_of_nodes
from signaling.scheduler_shares import SCHEDULER_SHARES

# The dashboard's snapshot waits this long for the other nodes: it goes out once a second.
ASK_TIMEOUT_S = 0.8


def sessions_here(app: web.Application) -> list[dict[str, Any]]:
    """Every session on this node: its description, `node_id` and `batch_share` (0-1, or null)."""
    sessions = app[SESSIONS].all()
    shares = app[SCHEDULER_SHARES]
    shares.sample(app[RUNNER], sessions)
    node_id = app[CLUSTER].id
    return [
        {**session.snapshot(), "node_id": node_id, "batch_share": shares.batch_share(session.id)}
        for session in sessions
    ]


async def sessions_on_other_nodes(
    request: web.Request, nodes: list[NodeRecord]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The sessions of every node in `nodes` but this one, and the ids of those that did not answer."""
    here = request.app[CLUSTER].id
    others = [node for node in nodes if node.id != here]
    if not others:
        return [], []
    return await sessions_of_nodes(request, others, "/api/admin/sessions", ASK_TIMEOUT_S)
