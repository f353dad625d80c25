"""The middleware that checks a forwarded request's signed hop (signaling/cluster/hops.py) before
any route reads it: verified, the hop is kept on the request; unverified, 403."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from signaling.app_keys import CLUSTER
from signaling.cluster.hops import FORWARDED_BY, HOP, verified_hop

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def verified_hops(request: web.Request, handler: Handler) -> web.StreamResponse:
    value = request.headers.get(FORWARDED_BY)
    if value is not None:
        request[HOP] = verified_hop(request.app[CLUSTER].hop_secret, value, request.method, request.path_qs)
    return await handler(request)
