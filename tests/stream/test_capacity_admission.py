"""Issue #36: a node admits by what its device carries; the rest wait in line, seeing their own video.

Real aiortc peers on an in-process server whose device is simulated by the fixed-cost chain
(4 ms a batch, 12 ms a frame: about 75 frames a second): two 30 fps sessions fit, a third would
drag all three below the 24 fps floor.
"""

import asyncio
import time

import aiohttp
import pytest
from aiortc import RTCPeerConnection

from client.facefuse_client import FacefuseClient
from signaling.app_keys import RUNNER, SESSIONS
from stream.load_shedding import RATE
from support.cluster_nodes import camera
from support.server import loopback_settings, running_server, wait_until

pytestmark = pytest.mark.asyncio

SETTINGS = loopback_settings("fixed-cost:4:12", stream={"max_queue": 2})


def places(session) -> list[dict]:
    return [event for event in session.events if event.get("type") == "queued"]


def processed_share(server_session, seconds: float):
    """Frames processed over frames received in the next `seconds`: a ratio, whatever this machine's speed."""

    async def measure() -> float:
        stats = server_session.stats
        processed, received = stats.frames_processed, stats.frames_in
        await asyncio.sleep(seconds)
        return (stats.frames_processed - processed) / max(1, stats.frames_in - received)

    return measure()


async def offer_sdp(client: FacefuseClient) -> tuple[RTCPeerConnection, str]:
    """A camera's offer, its candidates on loopback as the client makes them."""
    pc = RTCPeerConnection()
    pc.addTransceiver(camera(99), direction="sendrecv")
    pc.createDataChannel("events")
    await client._offer(pc)
    return pc, pc.localDescription.sdp


async def test_sessions_beyond_capacity_wait_in_line_and_the_first_starts_when_one_leaves():
    async with running_server(SETTINGS) as (url, app), FacefuseClient(url) as client:
        sessions = []
        for tag in range(4):
            session = await client.connect(camera(tag))
            sessions.append(session)
            await wait_until(lambda session=session: session.frames_received >= 15, timeout=20)
        server = [app[SESSIONS].get(session.session_id) for session in sessions]
        assert [s.queued for s in server] == [False, False, True, True]

        # the waiting see their place, and their own video coming back unprocessed and uncharged
        await wait_until(lambda: places(sessions[3]) and places(sessions[3])[-1]["position"] == 2, timeout=5)
        assert places(sessions[2])[-1]["position"] == 1 and "estimated_wait_s" in places(sessions[2])[-1]
        assert server[2].stats.frames_waiting > 0 and server[2].stats.frames_processed == 0
        assert server[2].stats.frames_charged == 0
        # the processed ones keep their rate: with all four processed each got about 18 of 30
        shares = await asyncio.gather(*(processed_share(s, 3.0) for s in server[:2]))
        assert min(shares) >= 0.8, shares

        # the line is full: the next is told so at once, with when to try again
        pc, sdp = await offer_sdp(client)
        try:
            async with aiohttp.ClientSession() as http:
                async with http.post(f"{url}/api/offer", json={"sdp": sdp, "type": "offer"}) as response:
                    body = await response.json()
                    assert response.status == 503 and body["error"]["code"] == "line_full", body
                    assert response.headers["Retry-After"].isdigit()
        finally:
            await pc.close()

        # one leaves: the first in line starts within 2 s, and the second moves up
        left_at = time.monotonic()
        await client.request("DELETE", f"/api/sessions/{sessions[0].session_id}")
        await wait_until(lambda: any(e.get("type") == "admitted" for e in sessions[2].events), timeout=2.0)
        assert time.monotonic() - left_at <= 2.0
        await wait_until(lambda: server[2].stats.frames_processed > 10, timeout=5)
        await wait_until(lambda: places(sessions[3])[-1]["position"] == 1, timeout=2)
        assert server[3].queued
        # a place has freed since the start: the wait is now estimated
        assert places(sessions[3])[-1]["estimated_wait_s"] is not None
        for session in sessions:
            await session.close()


async def test_a_spike_sheds_the_free_session_first_and_undoes_it_when_the_load_falls():
    """The chain's cost doubles at run time: the free session goes to half rate; it triples: on to a
    smaller size, then back into line, while the paid one keeps its rate. When the cost falls back
    the free one comes back."""
    from support.metering import ADMIN, create_account, metered_settings

    settings = metered_settings(None, chain="fixed-cost:4:12")
    async with running_server(settings) as (url, app), FacefuseClient(url, api_key=ADMIN) as admin:
        free_key = await create_account(admin, "free-user", 10_000, tier="free")
        paid_key = await create_account(admin, "paid-user", 10_000, tier="paid")
        async with FacefuseClient(url, api_key=paid_key) as paid, FacefuseClient(url, api_key=free_key) as free:
            paid_session = await paid.connect(camera(1))
            free_session = await free.connect(camera(2))
            for session in (paid_session, free_session):
                await wait_until(lambda session=session: session.frames_received >= 15, timeout=20)
            server_paid = app[SESSIONS].get(paid_session.session_id)
            server_free = app[SESSIONS].get(free_session.session_id)
            assert not server_paid.queued and not server_free.queued

            chain = app[RUNNER].chain
            chain.frame_ms *= 2  # another tenant on the device: each frame costs twice as much
            await wait_until(lambda: server_free.shed_step == RATE, timeout=10)  # half rate: both hold 24 then
            chain.frame_ms *= 1.5  # three times: the free one goes further, down to the line
            await wait_until(lambda: server_free.queued, timeout=15)
            told = [e for e in free_session.events if e.get("type") in ("degraded", "restored", "queued", "admitted")]
            steps = [e["step"] for e in told if e["type"] == "degraded"]
            assert steps == ["rate", "resolution", "line"], told
            assert not [e for e in paid_session.events if e.get("type") == "degraded"]
            assert not server_paid.queued and server_paid.shed_step == 0
            # alone on a device three times slower the paid session gets 25 of 30 fps: above the floor
            share = await processed_share(server_paid, 3.0)
            assert share >= 0.75, (share, app[SESSIONS].capacity.describe(app[SESSIONS].all()))

            chain.frame_ms /= 3  # the other tenant left
            await wait_until(lambda: not server_free.queued, timeout=15)
            assert any(e.get("type") == "admitted" for e in free_session.events)
            await wait_until(lambda: server_free.stats.frames_processed > 0, timeout=5)
            for session in (paid_session, free_session):
                await session.close()


async def test_a_whip_publisher_on_a_full_node_waits_too_and_its_viewers_see_the_original():
    """OBS keeps streaming into the line (201, as any answer); a viewer plays its video meanwhile,
    unprocessed, and processing starts by itself when a place frees."""
    from support.whep_viewer import whep_viewer
    from support.whip_publisher import offer_like_obs, post_offer

    settings = loopback_settings("fixed-cost:4:25")  # one 30 fps session fits
    async with running_server(settings) as (url, app), FacefuseClient(url) as client:
        first = await client.connect(camera(1))
        await wait_until(lambda: first.frames_received >= 15, timeout=20)
        source = camera(2)
        async with aiohttp.ClientSession() as http:
            pc, sdp = await offer_like_obs(source)
            publisher = await post_offer(http, f"{url}/whip/show", pc, sdp)
            assert publisher.status == 201, publisher.body
            server = app[SESSIONS].get(publisher.headers["X-Facefuse-Session"])
            assert server.queued
            async with whep_viewer(http, f"{url}/whep/show", audio=False) as viewer:
                assert viewer.status == 201
                await wait_until(lambda: viewer.video_frames >= 10, timeout=20)
                assert server.stats.frames_waiting > 0 and server.stats.frames_processed == 0
                await client.request("DELETE", f"/api/sessions/{first.session_id}")
                await wait_until(lambda: not server.queued, timeout=2.0)
                await wait_until(lambda: server.stats.frames_processed > 10, timeout=5)
                seen = viewer.video_frames
                await wait_until(lambda: viewer.video_frames >= seen + 10, timeout=5)  # now processed frames
            await publisher.close()
        await first.close()
