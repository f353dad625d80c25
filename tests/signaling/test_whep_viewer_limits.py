"""What bounds WHEP viewers (stream/viewer_admission.py, stream/viewer.py), with real aiortc peers:
a viewer that never connects is closed at the connect deadline; a view token holds at most its
own share; the owner always gets in, whatever a token's holders took; the node caps all viewers;
and a revoked token's viewers stop at once."""

from __future__ import annotations

import dataclasses
import json
import time

import aiohttp
import pytest
from aiortc import RTCPeerConnection

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from signaling.app_keys import ACCOUNTS, SESSIONS
from signaling.revoked_viewers import REVOKED_REASON, SWEEP_S
from stream.ice import restrict_gathering, rtc_configuration
from stream.peer_close import close_peer
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, running_server, wait_until
from support.whep_viewer import whep_viewer
from support.whip_publisher import LOOPBACK, offer_like_obs, post_offer

CONNECT_DEADLINE_S = 2.0  # the server's idle timeout, short for the test


def settings(**stream: object):
    base = metered_settings(None, chain="passthrough")
    stream = {"idle_timeout_s": CONNECT_DEADLINE_S, **stream}
    return dataclasses.replace(base, stream=dataclasses.replace(base.stream, **stream))


async def an_offer_that_never_connects() -> str:
    """A viewer's offer whose peer is closed before anything answers it: no ICE will follow."""
    pc = RTCPeerConnection(rtc_configuration(LOOPBACK))
    pc.addTransceiver("video", direction="recvonly")
    await restrict_gathering(pc, LOOPBACK)
    await pc.setLocalDescription(await pc.createOffer())
    sdp = pc.localDescription.sdp
    await close_peer(pc)
    return sdp


async def post_whep(http: aiohttp.ClientSession, url: str, sdp: str, credential: str) -> tuple[int, str, str]:
    """(status, viewer id or the error's code, body) of a WHEP POST."""
    headers = {"Content-Type": "application/sdp", "Authorization": f"Bearer {credential}"}
    async with http.post(url, data=sdp.encode(), headers=headers) as response:
        body = await response.text()
        if response.status == 201:
            return response.status, response.headers["X-Facefuse-Viewer"], body
        return response.status, json.loads(body)["error"]["code"], body


class Streamer:
    """An account publishing `cam` over WHIP, with view tokens for it."""

    def __init__(self, url: str, http: aiohttp.ClientSession, key: str) -> None:
        self.url, self.http, self.key = url, http, key
        self.publisher = None

    async def publish(self, stream: str = "cam") -> None:
        pc, sdp = await offer_like_obs(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
        self.publisher = await post_offer(
            self.http, f"{self.url}/whip/{stream}", pc, sdp, headers={"Authorization": f"Bearer {self.key}"}
        )
        assert self.publisher.status == 201, self.publisher.body

    async def view_token(self, stream: str = "cam") -> tuple[str, str]:
        async with self.http.post(
            f"{self.url}/api/streams/{stream}/view-tokens", headers={"Authorization": f"Bearer {self.key}"}
        ) as response:
            created = await response.json()
        return created["id"], created["token"]

    async def close(self) -> None:
        if self.publisher is not None:
            await self.publisher.close()


async def streamer_on(url: str, http: aiohttp.ClientSession, name: str = "ada") -> Streamer:
    async with FacefuseClient(url, api_key=ADMIN) as admin:
        return Streamer(url, http, await create_account(admin, name, 1000, tier="paid"))


async def test_viewers_that_never_connect_are_closed_at_the_deadline_and_free_the_stream():
    """Before: 50 such offers stayed `connecting` for good, and the owner's own viewer got 503."""
    # 7 a stream: view tokens may take 2 of them (7 less the owner's 5)
    async with running_server(settings(max_viewers_per_stream=7)) as (url, app), aiohttp.ClientSession() as http:
        ada = await streamer_on(url, http)
        await ada.publish()
        try:
            token_id, token = await ada.view_token()
            sdp = await an_offer_that_never_connects()
            posted_at = time.monotonic()
            answered = [await post_whep(http, f"{url}/whep/cam", sdp, token) for _ in range(2)]
            assert [status for status, _, _ in answered] == [201, 201], answered
            assert {v.token_id for v in app[SESSIONS].viewers()} == {token_id}, "each viewer knows its token"
            await wait_until(lambda: app[SESSIONS].viewers() == [], timeout=CONNECT_DEADLINE_S + 5)
            assert time.monotonic() - posted_at >= CONNECT_DEADLINE_S
            reasons = {
                app[SESSIONS].recently_ended.find(viewer_id, "ada", "cam")["close_reason"]
                for _, viewer_id, _ in answered
            }
            assert reasons == {f"not connected within {CONNECT_DEADLINE_S:g} s"}, reasons
        finally:
            await ada.close()


async def test_a_token_holds_its_share_and_the_owner_always_gets_in():
    # 7 a stream: tokens may take 2 (7 less the owner's 5), one token 1 of them
    limits = {"max_viewers_per_stream": 7, "max_viewers_per_token": 1, "idle_timeout_s": 60.0}
    async with running_server(settings(**limits)) as (url, app), aiohttp.ClientSession() as http:
        ada = await streamer_on(url, http)
        await ada.publish()
        try:
            (_, first), (_, second), (_, third) = [await ada.view_token() for _ in range(3)]
            sdp = await an_offer_that_never_connects()
            statuses = [await post_whep(http, f"{url}/whep/cam", sdp, token) for token in (first, first, second, third)]
            assert [(status, code) for status, code, _ in statuses[1:]] == [
                (429, "view_token_viewers_full"),  # the first token's one viewer is taken
                (201, statuses[2][1]),
                (503, "too_many_viewers"),  # the tokens' two: the rest is the owner's
            ], statuses
            assert statuses[0][0] == 201
            owners = [await post_whep(http, f"{url}/whep/cam", sdp, ada.key) for _ in range(5)]
            assert [status for status, _, _ in owners] == [201] * 5, owners
            status, code, _ = await post_whep(http, f"{url}/whep/cam", sdp, ada.key)
            assert (status, code) == (503, "too_many_viewers")  # the stream's whole limit
        finally:
            await ada.close()


async def test_the_node_caps_every_streams_viewers_together():
    async with (
        running_server(settings(max_viewers=2, idle_timeout_s=60.0)) as (url, app),
        aiohttp.ClientSession() as http,
    ):
        ada, bea = await streamer_on(url, http, "ada"), await streamer_on(url, http, "bea")
        await ada.publish()
        await bea.publish()
        try:
            sdp = await an_offer_that_never_connects()
            assert (await post_whep(http, f"{url}/whep/cam", sdp, ada.key))[0] == 201
            assert (await post_whep(http, f"{url}/whep/cam", sdp, bea.key))[0] == 201
            status, code, _ = await post_whep(http, f"{url}/whep/cam", sdp, bea.key)
            assert (status, code) == (503, "node_viewers_full")
        finally:
            await ada.close()
            await bea.close()


async def test_revoking_a_token_stops_its_live_viewers_at_once():
    """Before: a revoked token's live viewer received 601 frames in the next 20 s."""
    async with running_server(settings(idle_timeout_s=60.0)) as (url, app), aiohttp.ClientSession() as http:
        ada = await streamer_on(url, http)
        await ada.publish()
        try:
            token_id, token = await ada.view_token()
            _, kept_token = await ada.view_token()
            async with (
                whep_viewer(http, f"{url}/whep/cam", token=token) as revoked,
                whep_viewer(http, f"{url}/whep/cam", token=kept_token) as kept,
            ):
                await wait_until(lambda: revoked.video_frames >= 3 and kept.video_frames >= 3, timeout=15)
                async with http.get(f"{url}/api/streams", headers={"Authorization": f"Bearer {ada.key}"}) as response:
                    (stream,) = (await response.json())["streams"]
                listed = {v["viewer_id"]: v["view_token_id"] for v in stream["viewers"]}
                assert listed[revoked.headers["X-Facefuse-Viewer"]] == token_id, listed  # the owner sees which token
                async with http.delete(
                    f"{url}/api/streams/cam/view-tokens/{token_id}", headers={"Authorization": f"Bearer {ada.key}"}
                ) as response:
                    assert response.status == 200 and (await response.json())["viewers_closed"] == 1
                await wait_until(lambda: revoked.pc.connectionState in ("closed", "failed"), timeout=10)
                frames = revoked.video_frames
                before = kept.video_frames
                await wait_until(lambda: kept.video_frames >= before + 10, timeout=10)  # the other token plays on
                assert revoked.video_frames == frames
        finally:
            await ada.close()


@pytest.mark.redis
async def test_a_token_revoked_through_another_node_stops_its_viewers_here_within_a_sweep(redis_server):
    """Viewers live on their stream's node; the owner may revoke through any node. Here the token
    is revoked in the shared store directly, as another node does: this node's sweep sees it."""
    base = metered_settings(redis_server.url, chain="passthrough")
    async with running_server(base) as (url, app), aiohttp.ClientSession() as http:
        ada = await streamer_on(url, http)
        await ada.publish()
        try:
            token_id, token = await ada.view_token()
            async with whep_viewer(http, f"{url}/whep/cam", token=token) as viewer:
                await wait_until(lambda: viewer.video_frames >= 3, timeout=15)
                assert await app[ACCOUNTS].store.revoke_view_token("ada", "cam", token_id)
                revoked_at = time.monotonic()
                await wait_until(lambda: app[SESSIONS].viewers() == [], timeout=SWEEP_S + 5)
                print(f"\nclosed {time.monotonic() - revoked_at:.1f} s after the store revoked its token")
                ended = app[SESSIONS].recently_ended.find(viewer.headers["X-Facefuse-Viewer"], "ada", "cam")
                assert ended["close_reason"] == REVOKED_REASON
        finally:
            await ada.close()
