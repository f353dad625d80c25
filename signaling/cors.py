"""CORS for the origins --allow-origin lists: without it a browser would not let their pages send
a JSON body or an Authorization header here (the preflight), nor read the answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from signaling.origin_check import normalized_origin

PREFLIGHT_HEADERS = {
    "Access-Control-Allow-Methods": "GET, POST, PATCH, DELETE",  # PATCH: WHIP/WHEP trickle
    "Access-Control-Allow-Headers": "Authorization, Content-Type, If-Match",
    "Access-Control-Max-Age": "600",
}
# What a WHIP/WHEP player page must read of an answer: the resource's URL, its ETag for a PATCH's
# If-Match, the ICE servers, when to retry, and which session or viewer it got.
EXPOSED_HEADERS = "Location, ETag, Link, Retry-After, X-Facefuse-Session, X-Facefuse-Viewer"


def cors_for_allowed_origins(allowed_origins: tuple[str, ...]) -> Callable:
    allowed = frozenset(allowed_origins)

    def listed(origin: str | None) -> bool:
        try:
            return origin is not None and normalized_origin(origin) in allowed
        except ValueError:
            return False

    @web.middleware
    async def cors(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if not listed(origin):  # other pages get no CORS headers: the browser keeps our answers from them
            return await handler(request)
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            response: web.StreamResponse = web.Response(status=204, headers=PREFLIGHT_HEADERS)
        else:
            response = await handler(request)
        if not response.prepared:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
            response.headers["Vary"] = "Origin"
        return response

    return cors
