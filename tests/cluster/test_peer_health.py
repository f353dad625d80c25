"""A node that never answers does not stall the others (signaling/cluster/peer_health.py): requests
to it hold at most their own connections, it is marked unhealthy after a few failures so the next
requests for it fail at once, and no new session is sent to it by 307. Against the real app on a
real redis-server, with stand-ins for the other nodes (our own interface). Issue #35 reported 120
requests to a silent node's session each waiting 5-6 s for its 503 (still so before the mark, and
every one after it without the mark: this test fails then), and a forward to a healthy node taking
4.6 s meanwhile (not reproduced by this setup on the shared pool; the per-peer bound keeps it so)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import socket
import time
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from signaling.cluster.forwarding import FORWARD_TIMEOUT_S
from signaling.cluster.node_registry import NodeRecord, RedisNodeRegistry
from signaling.cluster.peer_health import COOL_OFF_S, FAILURES_TO_MARK, PeerHealth
from signaling.cluster.session_directory import DirectoryEntry, RedisDirectory
from support.app_on_loopback import app_on_loopback
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, running_server
from support.whip_publisher import offer_like_obs, post_offer

STUCK_REQUESTS = 120


def test_a_node_is_marked_after_failures_in_a_row_and_tried_again_after_the_cool_off():
    now = [0.0]
    peers = PeerHealth(clock=lambda: now[0])
    for _ in range(FAILURES_TO_MARK - 1):
        peers.failed("b")
    peers.succeeded("b")  # an answer in between: the count starts again
    for _ in range(FAILURES_TO_MARK - 1):
        peers.failed("b")
    assert peers.healthy("b") and peers.unhealthy() == set()
    peers.failed("b")
    assert not peers.healthy("b") and peers.unhealthy() == {"b"}
    now[0] += COOL_OFF_S + 0.1
    assert peers.healthy("b"), "one request tries it again after the cool-off"
    assert not peers.healthy("b"), "and only one"
    peers.succeeded("b")
    assert peers.healthy("b") and peers.unhealthy() == set()


@contextlib.contextmanager
def silent_node() -> Iterator[str]:
    """An address that takes TCP connections and never answers one."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


@contextlib.asynccontextmanager
async def answering_node() -> AsyncIterator[str]:
    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"session_id": request.match_info["session_id"], "state": "live"})

    app = web.Application()
    app.router.add_get("/api/sessions/{session_id}", answer)
    async with app_on_loopback(app) as url:
        yield url


async def timed_get(http: aiohttp.ClientSession, url: str) -> tuple[int, float]:
    started = time.monotonic()
    async with http.get(url) as response:
        await response.read()
        return response.status, time.monotonic() - started


@pytest.mark.redis
@pytest.mark.slow
async def test_a_silent_node_stalls_nobody_is_marked_and_gets_no_new_sessions(redis_server):
    base = metered_settings(redis_server.url, chain="passthrough")
    settings = dataclasses.replace(base, stream=dataclasses.replace(base.stream, max_sessions=1))
    with silent_node() as silent:
        async with running_server(settings) as (url, app), answering_node() as healthy:
            async with FacefuseClient(url, api_key=ADMIN) as admin:
                key = await create_account(admin, "ann", 1000)
            store = aioredis.from_url(redis_server.url, decode_responses=True)
            try:
                registry, directory = RedisNodeRegistry(store, "facefuse"), RedisDirectory(store, "facefuse")
                await registry.beat(NodeRecord("node-silent", silent, 4, 0, "passthrough", "cpu"))  # room: a 307 target
                await registry.beat(NodeRecord("node-ok", healthy, 4, 4, "passthrough", "cpu"))  # full
                await directory.register([DirectoryEntry("s-silent", "ann", "node-silent")])
                await directory.register([DirectoryEntry("s-ok", "ann", "node-ok")])
            finally:
                await store.aclose()
            as_ann = {"Authorization": f"Bearer {key}"}
            async with (
                aiohttp.ClientSession(headers=as_ann) as ann,
                # the stuck requests' own client, without aiohttp's 100-connection limit: what is measured
                # is the server's forwarding, not this test's pool
                aiohttp.ClientSession(headers=as_ann, connector=aiohttp.TCPConnector(limit=0)) as crowd,
                aiohttp.ClientSession() as http,
            ):
                # this node full: a new publisher is sent on, to the silent node (it has room on record)
                pc, sdp = await offer_like_obs(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
                first = await post_offer(http, f"{url}/whip/one", pc, sdp, headers={"Authorization": f"Bearer {key}"})
                try:
                    assert first.status == 201, first.body
                    async with http.post(
                        f"{url}/whip/two", data=sdp.encode(),
                        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/sdp"},
                        allow_redirects=False,
                    ) as sent_on:  # fmt: skip
                        assert (sent_on.status, sent_on.headers.get("Location")) == (307, f"{silent}/whip/two")

                    reference = min([(await timed_get(ann, f"{url}/api/sessions/s-ok"))[1] for _ in range(3)])
                    stuck = [
                        asyncio.ensure_future(timed_get(crowd, f"{url}/api/sessions/s-silent"))
                        for _ in range(STUCK_REQUESTS)
                    ]
                    await asyncio.sleep(0.5)
                    status, meanwhile = await timed_get(ann, f"{url}/api/sessions/s-ok")
                    print(f"\na healthy node's forward: {reference * 1000:.0f} ms alone, {meanwhile * 1000:.0f} ms beside "
                          f"{STUCK_REQUESTS} requests to a silent one")  # fmt: skip
                    assert status == 200 and meanwhile < 10 * reference + 0.5, (reference, meanwhile)
                    answers = await asyncio.gather(*stuck)
                    assert {status for status, _ in answers} == {503}

                    # marked: the next request for it fails at once, and no new session goes there
                    status, took = await timed_get(ann, f"{url}/api/sessions/s-silent")
                    assert status == 503 and took < FORWARD_TIMEOUT_S / 5, took
                    async with http.post(
                        f"{url}/whip/two", data=sdp.encode(),
                        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/sdp"},
                        allow_redirects=False,
                    ) as kept:  # fmt: skip
                        assert kept.status != 307, kept.headers.get("Location")
                finally:
                    await first.close()
