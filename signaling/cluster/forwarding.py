"""Sending a request on to the node that holds its session.

The JSON API is forwarded (this node asks the owner and relays its answer): its callers are
scripts and pages that would not all follow a 307 with a body, and a 307 would send the caller's
API key to another origin. WHIP/WHEP resources get a 307 to the owner instead, as RFC 9725 says.
A forwarded request carries a signed hop naming its caller instead of the caller's key
(signaling/cluster/hops.py), and is never forwarded again: no loops between nodes whose
directories disagree for a heartbeat.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from signaling.cluster.hops import CALLER, FORWARDED_BY, NOBODY, hop_of, signed_hop
from signaling.cluster.node_registry import NodeRecord
from signaling.errors import ApiError

if TYPE_CHECKING:
    from signaling.cluster.cluster_node import ClusterNode

# The owner answers these from memory; a node that takes longer is in trouble, not busy.
FORWARD_TIMEOUT_S = 5.0
# What a forwarded request carries of the caller's: what its body is. Never its credential: the
# signed hop names the caller (signaling/cluster/hops.py).
_PASSED_HEADERS = ("Content-Type", "Accept")
# What the owner's answer carries back besides its body: when to retry, how to authenticate, caching.
_RETURNED_HEADERS = ("Retry-After", "WWW-Authenticate", "Cache-Control")


def is_forwarded(request: web.Request) -> bool:
    """Sent by another node of the cluster, with a verified signature (signaling/cluster/hop_check.py)."""
    return hop_of(request) is not None


def forward_headers(request: web.Request, cluster: ClusterNode, method: str, path_qs: str) -> dict[str, str]:
    """The headers of `method path_qs` sent to another node on behalf of this request's caller."""
    headers = {name: request.headers[name] for name in _PASSED_HEADERS if name in request.headers}
    caller = request.get(CALLER, NOBODY)
    headers[FORWARDED_BY] = signed_hop(cluster.hop_secret, method, path_qs, cluster.id, caller)
    return headers


async def forward(
    request: web.Request, cluster: ClusterNode, node: NodeRecord, about: str = "the session"
) -> web.Response:
    """The owner's answer to this request, status and body as they are. `about`: what the node
    holds, for the 503 when it does not answer."""
    body = await request.read()
    assert cluster.http is not None
    if not cluster.peers.healthy(node.id):
        raise _unreachable(node, about, "its last requests failed; it is not asked again for a few seconds")
    try:
        async with cluster.http.request(
            request.method,
            node.url + request.path_qs,
            data=body or None,
            headers=forward_headers(request, cluster, request.method, request.path_qs),
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S),
        ) as answer:
            content = await answer.read()
            headers = {name: answer.headers[name] for name in _RETURNED_HEADERS if name in answer.headers}
    except (aiohttp.ClientError, TimeoutError) as exc:
        cluster.peers.failed(node.id)
        raise _unreachable(node, about, f"it did not answer ({type(exc).__name__})") from exc
    cluster.peers.succeeded(node.id)
    return web.Response(status=answer.status, body=content, content_type=answer.content_type, headers=headers)


def _unreachable(node: NodeRecord, about: str, why: str) -> ApiError:
    return ApiError(
        503,
        "node_unreachable",
        f"node {node.id!r}, which holds {about}: {why}; try again shortly",
        {"Retry-After": "5"},
    )


def redirect_to(request: web.Request, node: NodeRecord) -> web.HTTPTemporaryRedirect:
    """307 to the same path and query on the other node: the client repeats the request there."""
    return web.HTTPTemporaryRedirect(node.url + request.path_qs)
