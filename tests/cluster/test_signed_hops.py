"""Node-to-node requests are signed (signaling/cluster/hops.py), against the real app on a real
redis-server: a client's X-Facefuse-Forwarded-By is refused (before: it skipped placement and the
one-publisher-per-name rule), and a forwarded request carries a signed hop naming its caller, never
the caller's key (before: whatever URL a registry entry held received the account's and the admin's
keys, in plain HTTP)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from signaling.app_keys import CLUSTER
from signaling.cluster.hops import FORWARDED_BY, MAX_SKEW_S, signed_hop, verified_hop
from signaling.cluster.node_registry import NodeRecord, RedisNodeRegistry
from signaling.cluster.session_directory import DirectoryEntry, RedisDirectory
from signaling.cluster.startup import hop_secret_key
from signaling.errors import ApiError
from support.app_on_loopback import app_on_loopback
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, running_server
from support.whip_publisher import offer_like_obs, post_offer

pytestmark = pytest.mark.redis


@contextlib.asynccontextmanager
async def capturing_node() -> AsyncIterator[tuple[str, list[web.Request]]]:
    """A stand-in for another node (our own interface): records each request, answers a session."""
    seen: list[web.Request] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request)
        return web.json_response({"session_id": request.match_info["session_id"], "state": "live"})

    app = web.Application()
    app.router.add_get("/api/sessions/{session_id}", answer)
    async with app_on_loopback(app) as url:
        yield url, seen


async def test_a_client_cannot_pass_for_a_node(redis_server):
    async with running_server(metered_settings(redis_server.url, chain="passthrough")) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "ann", 100)
        secret = app[CLUSTER].hop_secret
        async with aiohttp.ClientSession() as http:
            forged = {
                "plain node id": "node-1",
                "another secret": signed_hop("s" * 32, "POST", "/whip/cam", "node-1", "ann"),
                "too old": signed_hop(secret, "POST", "/whip/cam", "node-1", "ann").replace(
                    ";t=", f";t={int(time.time() - MAX_SKEW_S - 5)}", 1
                ),
                "for another path": signed_hop(secret, "POST", "/whip/other", "node-1", "ann"),
            }
            for what, value in forged.items():
                pc, sdp = await offer_like_obs(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
                publisher = await post_offer(
                    http, f"{url}/whip/cam", pc, sdp, headers={"Authorization": f"Bearer {key}", FORWARDED_BY: value}
                )
                await publisher.close()
                assert publisher.status == 403 and '"forwarded_unverified"' in publisher.body, (what, publisher.body)
            # and a node's own signature, fresh, for this request, is believed
            path = "/api/sessions"
            async with http.get(
                url + path, headers={FORWARDED_BY: signed_hop(secret, "GET", path, "node-1", "ann")}
            ) as r:
                assert r.status == 200, await r.text()


async def test_a_forwarded_request_names_its_caller_and_carries_no_key(redis_server):
    async with (
        running_server(metered_settings(redis_server.url, chain="passthrough")) as (url, app),
        capturing_node() as (elsewhere, seen),
    ):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "ann", 100)
        client = aioredis.from_url(redis_server.url, decode_responses=True)
        try:
            # a node record whose URL is the stand-in's, holding a session of ann's
            await RedisNodeRegistry(client, "facefuse").beat(
                NodeRecord("node-x", elsewhere, 4, 1, "passthrough", "cpu")
            )
            await RedisDirectory(client, "facefuse").register([DirectoryEntry("s-elsewhere", "ann", "node-x")])
            shared = await client.get(hop_secret_key("facefuse"))
        finally:
            await client.aclose()
        async with FacefuseClient(url, api_key=key) as ann:
            assert (await ann.request("GET", "/api/sessions/s-elsewhere"))["state"] == "live"  # the stand-in's answer
        (request,) = seen
        assert "Authorization" not in request.headers, "the caller's key went to another node"
        hop = verified_hop(shared, request.headers[FORWARDED_BY], "GET", "/api/sessions/s-elsewhere")
        assert (hop.node_id, hop.caller) == (app[CLUSTER].id, "ann")
        with pytest.raises(ApiError):  # bound to its method and path: not reusable for another request
            verified_hop(shared, request.headers[FORWARDED_BY], "DELETE", "/api/sessions/s-elsewhere")
