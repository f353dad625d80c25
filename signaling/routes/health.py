"""GET /healthz and the page at /."""

from __future__ import annotations

from aiohttp import web

from signaling.app_keys import DEVICE, RUNNER, SESSIONS, SETTINGS

routes = web.RouteTableDef()


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    runner = request.app[RUNNER]
    status = 200 if runner.running else 503
    timer = getattr(runner.chain, "timer", None)  # face chains time their stages
    return web.json_response(
        {
            "status": "ok" if runner.running else "worker stopped",
            "chain": runner.chain.name,
            "device": request.app[DEVICE],
            "sessions": len(request.app[SESSIONS].all()),
            "scheduler": runner.stats(),
            "chain_stages_ms": timer.means() if timer is not None else None,
        },
        status=status,
    )


@routes.get("/")
async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(request.app[SETTINGS].http.static_dir / "index.html")
