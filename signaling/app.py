"""create_app(settings): wires the pipeline, the sessions and the routes together."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiohttp import web

from pipeline.chains import create_chain, create_photo_analysis
from pipeline.cost_calibration import calibrate
from pipeline.device import resolve_device, set_cpu_threads
from pipeline.faces import FaceLibrary
from pipeline.runner import BatchRunner
from quota.accounts import Accounts
from quota.errors import StoreUnavailable
from quota.memory_store import MemoryStore
from quota.meter import LateReturns
from quota.redis_store import RedisStore
from quota.settings import default_node_id
from quota.store import QuotaStore
from signaling.app_keys import (
    ACCOUNTS,
    DEVICE,
    DRAIN,
    FACES,
    LATE_RETURNS,
    METRICS,
    PHOTO_ANALYSIS,
    RUNNER,
    SESSIONS,
    SETTINGS,
    SHARED_FACES,
)
from signaling.bad_request_log import quiet_bad_request_log
from signaling.cluster.hop_check import verified_hops
from signaling.cluster.startup import cluster_node
from signaling.cors import cors_for_allowed_origins
from signaling.drain import Drain
from signaling.errors import json_errors
from signaling.event_streams import EventStreams
from signaling.http_metrics import count_requests
from signaling.origin_check import host_and_origin_check
from signaling.revoked_viewers import revoked_viewers
from signaling.routes import (
    account,
    admin_sessions,
    events,
    faces,
    health,
    ice_servers,
    metrics,
    nodes,
    pages,
    session_still,
    sessions,
    streams,
    whep,
    whip,
)
from signaling.routes import drain as drain_routes
from signaling.routes.faces import describe_face
from signaling.scheduler_shares import SCHEDULER_SHARES, SchedulerShares
from signaling.secret_headers import add_secret_headers, mask_access_log
from signaling.settings import ServerSettings
from signaling.shared_faces import SharedFaces
from stream.manager import SessionManager
from stream.node_capacity import NodeCapacity
from stream.node_metrics import NodeFacts, NodeMetrics

logger = logging.getLogger(__name__)


def create_app(settings: ServerSettings) -> web.Application:
    """The chain is built and warmed up in the app's startup, before the socket accepts sessions."""
    quiet_bad_request_log()  # a request aiohttp cannot parse: one line, not its bytes
    mask_access_log()  # view tokens and Bearer keys never reach the log
    node_metrics = NodeMetrics()
    app = web.Application(
        middlewares=[
            count_requests(node_metrics),  # outermost: the status the client gets
            cors_for_allowed_origins(settings.http.allowed_origins),
            json_errors,
            host_and_origin_check(settings),
            verified_hops,  # X-Facefuse-Forwarded-By: a node's signed hop, or 403
        ]
    )
    app[SETTINGS] = settings
    app[METRICS] = node_metrics
    # local mode has one account for everyone on this machine: the library's whole size is its own
    per_account = settings.http.max_faces if settings.local_mode else settings.http.max_faces_per_account
    app[FACES] = FaceLibrary(settings.http.max_faces, per_account)
    app[events.EVENT_STREAMS] = EventStreams(settings.events)
    app[SCHEDULER_SHARES] = SchedulerShares()  # the operator's batch and busy shares
    app.on_shutdown.append(events.end_event_streams)
    app.on_response_prepare.append(add_secret_headers)
    app.cleanup_ctx.append(_quota_store)
    app.cleanup_ctx.append(_pipeline_and_sessions)
    app.cleanup_ctx.append(revoked_viewers)
    app.cleanup_ctx.append(cluster_node)  # reads the sessions; stops first, leaving the registry
    app.add_routes(health.routes)
    app.add_routes(faces.routes)
    app.add_routes(sessions.routes)
    app.add_routes(session_still.routes)
    app.add_routes(account.routes)
    app.add_routes(streams.routes)
    app.add_routes(events.routes)
    app.add_routes(whip.routes)
    app.add_routes(whep.routes)
    app.add_routes(pages.routes)
    app.add_routes(metrics.routes)
    app.add_routes(nodes.routes)
    app.add_routes(admin_sessions.routes)
    app.add_routes(drain_routes.routes)
    app.add_routes(ice_servers.routes)
    app.router.add_static("/static/", settings.http.static_dir, follow_symlinks=False)
    return app


async def _quota_store(app: web.Application) -> AsyncIterator[None]:
    """Redis when --redis-url is given, else in memory; the local account in local mode. Before the
    socket accepts, the leases this node's previous run left (a crash) are settled: they held their
    accounts' session slots for the lease TTL, and a user reconnecting at once got 429."""
    settings = app[SETTINGS]
    quota = settings.quota
    node_id = quota.node_id or default_node_id(settings.http.port)
    common = {"hour_s": quota.hour_s, "refill_period_s": quota.refill_period_s, "node_id": node_id}
    store: QuotaStore = (
        RedisStore(
            quota.redis_url,
            prefix=quota.redis_prefix,
            max_connections=quota.redis_max_connections,
            pool_timeout_s=quota.redis_pool_timeout_s,
            **common,
        )
        if quota.redis_url
        else MemoryStore(**common)
    )
    app[ACCOUNTS] = Accounts(store, quota)
    app[LATE_RETURNS] = LateReturns()  # each session's meter gets it: returns a store outage delayed
    try:
        try:
            if settled := await store.settle_node_leases():
                logger.info("node %s: settled the %d lease(s) its previous run left open", node_id, settled)
        except StoreUnavailable as exc:  # not a reason to stay down: the store settles them after their TTL
            logger.warning("node %s: could not settle the leases its previous run left: %s", node_id, exc)
        if settings.local_mode:
            await app[ACCOUNTS].ensure_local()
        yield
    finally:
        await app[LATE_RETURNS].drain()  # sessions closed during a store outage: a last try
        await store.aclose()


async def _pipeline_and_sessions(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    device = resolve_device(settings.pipeline.device)
    if device.type == "cpu":
        set_cpu_threads(settings.pipeline.cpu_threads)
    # the uploads' analysis shares the face chains' models (and runs beside their batches)
    analysis = create_photo_analysis(settings.pipeline.chain, device, models_dir=settings.pipeline.models_dir)
    chain = create_chain(
        settings.pipeline.chain,
        device,
        app[FACES],
        badge=settings.pipeline.badge,
        keep_eyes_mouth=settings.pipeline.keep_eyes_mouth,
        hands=settings.pipeline.hands,
        models_dir=settings.pipeline.models_dir,
        analysis=analysis,
    )
    runner = BatchRunner(chain, settings.pipeline, on_batch=app[METRICS].observe_batch)
    await asyncio.to_thread(runner.start)  # warm-up may load weights: keep the loop free
    logger.info("chain %s warmed up on %s", chain.name, device)
    app[DEVICE] = str(device)
    app[RUNNER] = runner
    app[PHOTO_ANALYSIS] = analysis
    quota = settings.quota
    app[SHARED_FACES] = (
        SharedFaces(app[FACES], quota.redis_url, prefix=quota.redis_prefix, device=device, describe=describe_face)
        if quota.redis_url
        else None
    )
    await asyncio.to_thread(calibrate, chain, runner.cost, runner.max_batch)
    capacity = NodeCapacity(runner, settings.stream)
    app[SESSIONS] = SessionManager(runner, settings.stream, app[FACES], timings=app[METRICS], capacity=capacity)
    app[DRAIN] = Drain(app[SESSIONS], settings.stream.drain_timeout_s)
    app[METRICS].watch(runner, app[SESSIONS], NodeFacts(chain.name, str(device), settings.stream.max_sessions))
    codec_measurement = asyncio.ensure_future(asyncio.to_thread(capacity.codec.measure))
    ticks = asyncio.ensure_future(capacity.run(app[SESSIONS].all))
    try:
        yield
    finally:
        ticks.cancel()
        await asyncio.gather(ticks, codec_measurement, return_exceptions=True)
        await app[DRAIN].stop()
        await app[SESSIONS].close_all()
        await asyncio.to_thread(runner.stop)
        if app[SHARED_FACES] is not None:
            await app[SHARED_FACES].aclose()
