"""Draining a node (signaling/drain.py): the admin's request in-process; SIGTERM in
tests/signaling/test_cli.py."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import aiohttp
import pytest

from client.facefuse_client import FacefuseClient, ServerError
from client.image_track import ImageTrack
from stream.peer_close import close_peer
from support.metering import ADMIN, metered_settings
from support.server import face_rgb, loopback_settings, running_server, wait_until
from support.whip_publisher import offer_like_obs, post_offer

DRAIN_TIMEOUT_S = 2.0
# How long after its drain timeout a session may still be open: the close is sent at once, so this
# is the event's way back, with room for a machine twice as slow.
CLOSE_MARGIN_S = 1.5


def drained_settings():
    settings = metered_settings(None)
    return dataclasses.replace(settings, stream=dataclasses.replace(settings.stream, drain_timeout_s=DRAIN_TIMEOUT_S))


async def frames_keep_coming(session, seconds: float) -> int:
    before = session.frames_received
    await asyncio.sleep(seconds)
    return session.frames_received - before


async def test_a_drained_node_keeps_its_session_refuses_new_ones_and_closes_it_at_the_timeout():
    async with running_server(drained_settings()) as (url, _app), FacefuseClient(url, api_key=ADMIN) as admin:
        key = (await admin.request("POST", "/api/admin/accounts", json={"id": "ada", "tier": "paid", "balance": 100}))[
            "api_key"
        ]
        async with FacefuseClient(url, api_key=key) as ada:
            session = await ada.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            await wait_until(lambda: session.frames_received >= 5, timeout=10)

            asked_at = time.monotonic()
            drained = await admin.request("POST", "/api/admin/nodes/self/drain")
            assert drained["draining"] and drained["sessions"] == 1 and drained["timeout_s"] == DRAIN_TIMEOUT_S

            await wait_until(lambda: any(e.get("type") == "draining" for e in session.events), timeout=2)
            assert await frames_keep_coming(session, 0.5) > 0, "the live session goes on while the node drains"
            with pytest.raises(ServerError) as refused:
                await ada.connect(ImageTrack(face_rgb("biden.jpg"), width=320, height=240))
            assert (refused.value.status, refused.value.code) == (503, "node_draining")
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{url}/healthz") as health:
                    assert health.status == 503 and (await health.json())["status"] == "draining"
                async with http.get(f"{url}/livez") as live:
                    assert live.status == 200  # draining is not dead: an orchestrator must not restart it

            await wait_until(
                lambda: any(e.get("type") == "closed" for e in session.events), timeout=DRAIN_TIMEOUT_S + 5
            )
            closed_after_s = time.monotonic() - asked_at
            closed = next(e for e in session.events if e.get("type") == "closed")
            assert closed["code"] == "server_shutdown", closed
            # the server's deadline starts after the request left: never before the timeout, and soon after it
            assert DRAIN_TIMEOUT_S <= closed_after_s <= DRAIN_TIMEOUT_S + CLOSE_MARGIN_S, closed_after_s
            for _ in range(50):  # closing: its lease goes back and its connection closes after the event
                if not (await ada.request("GET", "/api/sessions"))["sessions"]:
                    break
                await asyncio.sleep(0.1)
            else:
                pytest.fail("the drained session was never removed")
            again = await admin.request("POST", "/api/admin/nodes/self/drain")
            assert again["draining"] and again["sessions"] == 0


async def test_a_new_offer_to_a_draining_node_gets_503_with_retry_after():
    async with running_server(drained_settings()) as (url, _app), aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {ADMIN}"}
        async with http.post(f"{url}/api/admin/nodes/self/drain", headers=headers) as response:
            assert response.status == 202
        async with http.post(f"{url}/api/admin/nodes/self/drain", headers=headers) as response:
            assert response.status == 200  # already draining
        async with http.post(
            f"{url}/api/admin/accounts", json={"id": "obs", "tier": "paid"}, headers=headers
        ) as response:
            account_key = (await response.json())["api_key"]
        pc, offer = await offer_like_obs(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
        try:
            publisher = await post_offer(
                http, f"{url}/whip/cam", pc, offer, headers={"Authorization": f"Bearer {account_key}"}
            )
            assert publisher.status == 503, publisher.body
            assert '"node_draining"' in publisher.body and publisher.headers["Retry-After"]
        finally:
            await close_peer(pc)


async def test_only_the_admin_drains_and_only_a_node_it_names():
    async with running_server(drained_settings()) as (url, _app), aiohttp.ClientSession() as http:
        async with http.post(f"{url}/api/admin/nodes/self/drain") as response:
            assert response.status == 401
        async with http.post(
            f"{url}/api/admin/nodes/some-other-node/drain", headers={"Authorization": f"Bearer {ADMIN}"}
        ) as response:
            assert response.status == 404 and (await response.json())["error"]["code"] == "node_not_found"
        async with http.get(f"{url}/healthz") as health:
            assert health.status == 200  # nothing was drained


async def test_without_an_admin_key_the_drain_endpoint_is_off():
    async with running_server(loopback_settings()) as (url, _app), aiohttp.ClientSession() as http:
        async with http.post(f"{url}/api/admin/nodes/self/drain") as response:
            assert response.status == 403
