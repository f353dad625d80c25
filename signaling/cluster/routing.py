"""What the routes do about other nodes: send a new session to a better node (307), forward a JSON
API request to the node holding its session, 307 a WHIP/WHEP resource request there, and gather
an account's sessions and published streams from every node."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from aiohttp import web

from signaling.app_keys import CLUSTER, SESSIONS
from signaling.cluster.forwarding import FORWARD_TIMEOUT_S, forward, forward_headers, is_forwarded, redirect_to
from signaling.cluster.node_registry import NodeRecord
from stream.errors import SessionNotFound

logger = logging.getLogger(__name__)

# GET /api/sessions waits this long for the other nodes' lists; a node slower than that is named
# in the answer's unreachable_nodes rather than holding up the whole list.
LIST_TIMEOUT_S = 2.0


async def place_new_session(request: web.Request) -> None:
    """307 to a better node for a new session (full, draining or clearly busier here)."""
    if is_forwarded(request):
        return
    node = await request.app[CLUSTER].place_new_session()
    if node is not None:
        raise redirect_to(request, node)


def _is_here(request: web.Request, session_id: str) -> bool:
    try:
        request.app[SESSIONS].get(session_id)
    except SessionNotFound:
        return False
    return True


async def _owner_elsewhere(request: web.Request, session_id: str) -> NodeRecord | None:
    if is_forwarded(request) or _is_here(request, session_id):
        return None
    return await request.app[CLUSTER].session_owner(session_id)


async def forwarded_to_owner(request: web.Request, session_id: str) -> web.Response | None:
    """The owning node's answer when the session is on another node; None: answer here."""
    node = await _owner_elsewhere(request, session_id)
    if node is None:
        return None
    return await forward(request, request.app[CLUSTER], node)


async def redirect_to_owner(request: web.Request, session_id: str) -> None:
    """307 to the node holding a WHIP session (RFC 9725 lets a resource move)."""
    node = await _owner_elsewhere(request, session_id)
    if node is not None:
        raise redirect_to(request, node)


async def redirect_to_stream_holder(request: web.Request, account_id: str | None, stream: str) -> None:
    """307 to the node holding the session published under the stream: a WHEP viewer, or its
    resource (a viewer lives on its stream's node)."""
    if is_forwarded(request) or request.app[SESSIONS].streams.find(account_id, stream) is not None:
        return
    holder = await request.app[CLUSTER].stream_holder(account_id, stream)
    if holder is not None:
        raise redirect_to(request, holder[0])


async def end_publication_elsewhere(request: web.Request, account_id: str | None, stream: str) -> None:
    """A publisher that reconnected to another node (OBS through a load balancer) replaces its
    session of the same stream name there, as on one node: ended before the new session's lease
    is opened, so the old one's does not refuse it, and viewers are not sent to the old one."""
    if is_forwarded(request):
        return
    cluster = request.app[CLUSTER]
    holder = await cluster.stream_holder(account_id, stream)
    if holder is None:
        return
    node, session_id = holder
    assert cluster.http is not None
    try:
        path = f"/api/sessions/{session_id}"
        async with cluster.http.delete(
            node.url + path,
            headers=forward_headers(request, cluster, "DELETE", path),
            timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S),
        ) as answer:
            await answer.read()
    except (aiohttp.ClientError, TimeoutError) as exc:  # it ends with its client, or its node's TTL
        logger.warning("could not end session %s on node %s, which published %r: %s", session_id, node.id, stream, exc)


async def sessions_elsewhere(request: web.Request, account_id: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The account's sessions on the other nodes (each asked in parallel), and the nodes that did not answer."""
    if is_forwarded(request):
        return [], []
    nodes = await request.app[CLUSTER].nodes_with_sessions_of(account_id)
    return await sessions_of_nodes(request, nodes, "/api/sessions", LIST_TIMEOUT_S)


async def sessions_of_nodes(
    request: web.Request, nodes: list[NodeRecord], path: str, timeout_s: float
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each node's answer to a forwarded GET of `path` (a JSON {"sessions": [...]}), asked in
    parallel, each session marked with its node_id; and the ids of the nodes that did not answer
    within `timeout_s`."""
    return await _lists_of_nodes(request, nodes, path, "sessions", timeout_s)


async def streams_elsewhere(request: web.Request, account_id: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The account's streams published on the other nodes (GET /api/streams asked of each node
    holding some of its sessions), each marked with its node_id, and the nodes that did not answer."""
    if is_forwarded(request):
        return [], []
    nodes = await request.app[CLUSTER].nodes_with_sessions_of(account_id)
    streams, unreachable = await _lists_of_nodes(request, nodes, "/api/streams", "streams", LIST_TIMEOUT_S)
    return [stream for stream in streams if stream.get("live")], unreachable


async def account_elsewhere(
    request: web.Request, account_id: str | None, timeout_s: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """The account's sessions and its live streams on the other nodes, with one look at the
    directory (a dashboard's snapshot), and the nodes that did not answer either."""
    cluster = request.app[CLUSTER]
    if is_forwarded(request) or not cluster.knows_other_nodes():  # a lone node asks Redis nothing
        return [], [], []
    nodes = await cluster.nodes_with_sessions_of(account_id)
    (sessions, silent), (streams, silent_too) = await asyncio.gather(
        _lists_of_nodes(request, nodes, "/api/sessions", "sessions", timeout_s),
        _lists_of_nodes(request, nodes, "/api/streams", "streams", timeout_s),
    )
    return sessions, [stream for stream in streams if stream.get("live")], sorted(set(silent) | set(silent_too))


async def _lists_of_nodes(
    request: web.Request, nodes: list[NodeRecord], path: str, key: str, timeout_s: float
) -> tuple[list[dict[str, Any]], list[str]]:
    cluster = request.app[CLUSTER]
    assert cluster.http is not None
    http = cluster.http

    async def ask(node: NodeRecord) -> list[dict[str, Any]]:
        """The node's entries, marked with its id; any failure, a malformed answer too, raises.
        A node marked unhealthy is not asked (signaling/cluster/peer_health.py)."""
        if not cluster.peers.healthy(node.id):
            raise ConnectionError(f"node {node.id} is marked unhealthy")
        try:
            async with http.get(
                node.url + path,
                headers=forward_headers(request, cluster, "GET", path),
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as answer:
                answer.raise_for_status()
                entries = [{**entry, "node_id": node.id} for entry in (await answer.json())[key]]
        except (aiohttp.ClientConnectionError, TimeoutError):
            cluster.peers.failed(node.id)
            raise
        cluster.peers.succeeded(node.id)
        return entries

    answers = await asyncio.gather(*(ask(node) for node in nodes), return_exceptions=True)
    found: list[dict[str, Any]] = []
    unreachable: list[str] = []
    for node, answer in zip(nodes, answers):
        if isinstance(answer, BaseException):
            unreachable.append(node.id)
        else:
            found.extend(answer)
    return found, unreachable
