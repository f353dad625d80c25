"""Counts every HTTP request for the node's metrics, by method, route template and status."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from aiohttp import web

from stream.node_metrics import NodeMetrics

# A request's method is the client's to write: any other counts as "other", so labels stay few.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# The status counted for a client that left before its answer (nginx's "client closed request").
CLIENT_LEFT = 499

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def route_template(request: web.Request) -> str:
    """The route as written (/api/sessions/{session_id}), never the path itself: its ids have no bound."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def count_requests(metrics: NodeMetrics) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """The outermost middleware: it counts the status the client gets, errors turned to JSON included."""

    @web.middleware
    async def counted(request: web.Request, handler: Handler) -> web.StreamResponse:
        started = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:  # a redirect: json_errors answers every error itself
            status = exc.status
            raise
        except asyncio.CancelledError:
            status = CLIENT_LEFT
            raise
        finally:
            method = request.method if request.method in METHODS else "other"
            route = route_template(request)
            metrics.http_requests.labels(method, route, str(status)).inc()
            metrics.http_duration.labels(method, route).observe(time.perf_counter() - started)

    return counted
