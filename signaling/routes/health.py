"""GET /healthz (ready for new sessions?), GET /livez (alive?) and the page at /."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from quota.errors import StoreUnavailable
from quota.store import QuotaStore
from signaling.app_keys import ACCOUNTS, DEVICE, DRAIN, RUNNER, SESSIONS, SETTINGS

logger = logging.getLogger(__name__)
routes = web.RouteTableDef()

# A health probe must answer before a load balancer's own timeout (often 1-2 s), also
# when Redis accepts connections but never replies.
STORE_PING_TIMEOUT_S = 1.0


async def _store_reachable(store: QuotaStore) -> bool:
    try:
        async with asyncio.timeout(STORE_PING_TIMEOUT_S):
            await store.ping()
    except (StoreUnavailable, TimeoutError) as exc:
        logger.warning("health check: quota store unavailable: %s", exc or "no answer")
        return False
    return True


def readiness(worker_running: bool, store_ok: bool) -> str:
    """The status: "ok" where this node can start sessions, else why not (/healthz's and the dashboard's status)."""
    if not worker_running:
        return "worker stopped"
    if not store_ok:
        return "quota store unavailable"
    return "ok"


@routes.get("/healthz")
async def healthz(request: web.Request) -> web.Response:
    """503 when this node cannot start sessions: its worker stopped, or the quota store
    (without which no offer is accepted) does not answer."""
    runner = request.app[RUNNER]
    store_ok = await _store_reachable(request.app[ACCOUNTS].store)
    status = readiness(runner.running, store_ok)
    drain = request.app[DRAIN]
    if status == "ok" and drain.draining:  # the load balancer stops sending it new sessions
        status = "draining"
    timer = getattr(runner.chain, "timer", None)  # face chains time their stages
    return web.json_response(
        {
            "status": status,
            "chain": runner.chain.name,
            "device": request.app[DEVICE],
            "quota_store": "ok" if store_ok else "unavailable",
            # the camera page asks for an API key only where there are accounts
            "local_account": request.app[SETTINGS].local_mode,
            "sessions": len(request.app[SESSIONS].all()),
            # how many more fit, and why (stream/capacity.py): a full node still answers 200, as it
            # takes new sessions into its line (docs/running.md)
            "capacity": request.app[SESSIONS].capacity.describe(request.app[SESSIONS].all()),
            "drain": drain.describe(),
            "scheduler": runner.stats(),
            "chain_stages_ms": timer.means() if timer is not None else None,
        },
        status=200 if status == "ok" else 503,
    )


@routes.get("/livez")
async def livez(request: web.Request) -> web.Response:
    """503 only when this process is of no more use: its worker stopped. For an orchestrator's
    liveness probe, which restarts what fails it: /healthz fails on every node at once when Redis
    is away, and restarting them all would end every live session for a blip of the store."""
    runner = request.app[RUNNER]
    status = "ok" if runner.running else "worker stopped"
    return web.json_response(
        {"status": status, "sessions": len(request.app[SESSIONS].all())}, status=200 if status == "ok" else 503
    )


@routes.get("/")
async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(request.app[SETTINGS].http.static_dir / "index.html")
