"""GET /metrics: the node's Prometheus metrics (docs/metrics.md), for loopback, the admin key and
the networks in --metrics-allow."""

from __future__ import annotations

import asyncio
import logging
import math
import time

from aiohttp import web
from prometheus_client.aiohttp import make_aiohttp_handler

from quota.errors import StoreUnavailable
from signaling.app_keys import ACCOUNTS, METRICS, SESSIONS, SETTINGS
from signaling.auth import require_admin
from signaling.client_address import client_address
from signaling.errors import ApiError
from signaling.metrics_access import may_scrape
from signaling.routes.health import STORE_PING_TIMEOUT_S
from stream.node_metrics import NodeMetrics

logger = logging.getLogger(__name__)
routes = web.RouteTableDef()


def check_metrics_access(request: web.Request) -> None:
    """Loopback and --metrics-allow's networks read freely; others only with the admin key (401 for
    a wrong one, 403 without one or when the server has none)."""
    # behind a --trusted-proxy, the client's address, never the proxy's
    if may_scrape(client_address(request), request.app[SETTINGS].http.metrics_allow):
        return
    if "Authorization" in request.headers:
        require_admin(request)
        return
    raise ApiError(
        403,
        "forbidden",
        "GET /metrics answers loopback, the networks given with --metrics-allow, and the admin key "
        "(Authorization: Bearer); this address is none of them",
    )


@routes.get("/metrics")
async def metrics(request: web.Request) -> web.Response:
    check_metrics_access(request)
    node = request.app[METRICS]
    await _ping_quota_store(request, node)
    sessions = request.app[SESSIONS]
    peers = [*sessions.all(), *sessions.viewers()]
    await asyncio.gather(*(peer.refresh_webrtc_counts() for peer in peers))
    return await make_aiohttp_handler(node.registry)(request)


async def _ping_quota_store(request: web.Request, node: NodeMetrics) -> None:
    """A ping at each scrape, bounded as the health check's: up or down, and its round trip."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(STORE_PING_TIMEOUT_S):
            await request.app[ACCOUNTS].store.ping()
    except (StoreUnavailable, TimeoutError) as exc:
        logger.warning("metrics: quota store unavailable: %s", exc or "no answer")
        node.quota_store_up.set(0)
        node.quota_store_rtt.set(math.nan)
        return
    node.quota_store_up.set(1)
    node.quota_store_rtt.set(time.perf_counter() - started)
