"""The operator's list of sessions: every session on this node with its node and its share of the
batches, and every session on the other nodes sharing the Redis, each node asked in parallel
(GET /api/admin/sessions) with a short bound. A node that does not answer is named, not waited for."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web

from signaling.app_keys import CLUSTER, RUNNER, SESSIONS
from signaling.cluster.forwarding import forward_headers
from signaling.cluster.node_registry import NodeRecord
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
    cluster = request.app[CLUSTER]
    others = [node for node in nodes if node.id != cluster.id]
    if not others:
        return [], []
    assert cluster.http is not None
    http = cluster.http

    async def ask(node: NodeRecord) -> list[dict[str, Any]]:
        async with http.get(
            node.url + "/api/admin/sessions",
            headers=forward_headers(request, cluster.id),
            timeout=aiohttp.ClientTimeout(total=ASK_TIMEOUT_S),
        ) as answer:
            answer.raise_for_status()
            return [{**session, "node_id": node.id} for session in (await answer.json())["sessions"]]

    answers = await asyncio.gather(*(ask(node) for node in others), return_exceptions=True)
    sessions: list[dict[str, Any]] = []
    silent: list[str] = []
    for node, answer in zip(others, answers):
        if isinstance(answer, BaseException):
            silent.append(node.id)
        else:
            sessions.extend(answer)
    return sessions, silent
