"""GET /api/events: the dashboard's event stream, read with aiohttp's client against the real app
and real aiortc sessions: its snapshots match the API's own answers, each caller sees what is
theirs, and a client that stops reading costs the server a bounded buffer, then its connection."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time

import aiohttp
import pytest

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from signaling.app_keys import SESSIONS
from signaling.event_streams import EventStreamSettings
from signaling.routes.events import EVENT_STREAMS, MAX_BUFFERED_BYTES
from support.event_stream import open_events
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, loopback_settings, running_server, wait_until
from support.whep_viewer import whep_viewer
from support.whip_publisher import offer_like_obs, post_offer

# A session's fields that do not move while it streams; the counters are compared as bounds.
STEADY = ("session_id", "state", "account_id", "face_id", "stream", "options", "created_at", "codec", "width", "height")
COUNTERS = ("frames_in", "frames_out", "frames_processed", "frames_charged")


def with_events(settings, **events):
    return dataclasses.replace(settings, events=EventStreamSettings(**events))


async def test_the_snapshot_matches_the_api():
    async with running_server(loopback_settings()) as (url, app):
        async with FacefuseClient(url) as client:
            session = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            await wait_until(lambda: session.frames_received >= 10, timeout=10)
            async with open_events(url) as events:
                headers = events.response.headers
                assert headers["Content-Type"] == "text/event-stream"
                assert headers["Cache-Control"] == "no-store" and headers["X-Accel-Buffering"] == "no"
                path = f"/api/sessions/{session.session_id}"
                # the network figures need two samples of getStats, the round trip a receiver report
                deadline = time.monotonic() + 10
                while True:
                    before = await client.request("GET", path)
                    asked_at = time.time()
                    snapshot = await events.snapshot(after=asked_at)
                    after = await client.request("GET", path)
                    if None not in after["network"].values() or time.monotonic() > deadline:
                        break
                assert set(snapshot) == {"t", "account", "sessions", "streams", "faces", "errors"}
                assert snapshot["errors"] == []
                (described,) = snapshot["sessions"]
                assert set(described) == set(after) | {"node_id"}  # listed with its node, as GET /api/sessions does
                for name in STEADY:
                    assert described[name] == after[name], name
                for name in COUNTERS:  # built between the two answers: within what that second added
                    assert before[name] <= described[name] <= after[name], (name, before, described, after)
                assert described["viewers"] == 0 and described["throttle"] is None
                network = after["network"]
                print(f"network: {network}")
                assert set(network) == {"bitrate_in_bps", "bitrate_out_bps", "packets_lost_ratio", "rtt_ms"}
                assert network["bitrate_in_bps"] > 0 and network["bitrate_out_bps"] > 0
                assert 0 <= network["packets_lost_ratio"] <= 1 and network["rtt_ms"] >= 0
                # the burn rate moves between the snapshot and the request that follows it
                account = await client.request("GET", "/api/account")
                assert {**snapshot["account"], "burn_rate": None} == {**account, "burn_rate": None}
                assert snapshot["account"]["burn_rate"] == pytest.approx(account["burn_rate"], rel=0.05)
                assert snapshot["streams"] == (await client.request("GET", "/api/streams"))["streams"]
                assert snapshot["faces"] == (await client.request("GET", "/api/faces"))["faces"]
            await session.close()


async def test_an_account_sees_its_own_the_admin_key_every_session_and_the_node():
    async with running_server(metered_settings(None)) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            keys = {name: await create_account(admin, name, balance=100) for name in ("alice", "bob")}
            clients = {name: FacefuseClient(url, api_key=key) for name, key in keys.items()}
            sessions = {}
            try:
                for name, client in clients.items():
                    sessions[name] = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
                await wait_until(lambda: all(s.frames_received >= 5 for s in sessions.values()), timeout=15)
                for name, key in keys.items():
                    async with open_events(url, key) as events:
                        snapshot = await events.snapshot()
                    assert [s["session_id"] for s in snapshot["sessions"]] == [sessions[name].session_id]
                    assert snapshot["account"]["id"] == name and "node" not in snapshot
                async with open_events(url, ADMIN) as events:
                    snapshot = await events.snapshot()
                assert {s["session_id"] for s in snapshot["sessions"]} == {s.session_id for s in sessions.values()}
                assert snapshot["account"] is None and snapshot["streams"] is None and snapshot["faces"] is None
                node = snapshot["node"]
                health = await admin.request("GET", "/healthz")
                assert node["ready"] is True and node["status"] == health["status"] == "ok"
                assert (node["chain"], node["device"]) == (health["chain"], health["device"])
                assert set(node["scheduler"]) == set(health["scheduler"]) | {"busy_share"}
                assert node["quota_store"]["ok"] is True and node["quota_store"]["rtt_ms"] >= 0
                assert node["memory"]["resident_bytes"] > 0 and node["memory"]["device_bytes"] is None
                accounts = node["accounts"]
                assert {a["id"] for a in accounts} == {"alice", "bob"}
                assert [a["burn_rate"] for a in accounts] == sorted((a["burn_rate"] for a in accounts), reverse=True)
                for entry in accounts:
                    described = await admin.request("GET", f"/api/admin/accounts/{entry['id']}")
                    assert set(entry) == {"id", "tier", "balance", "burn_rate", "active_sessions"}
                    assert entry["tier"] == described["tier"] and entry["active_sessions"] == 1
            finally:
                for session in sessions.values():
                    await session.close()
                for client in clients.values():
                    await client.close()


async def test_a_bad_key_is_401_before_any_stream():
    async with running_server(metered_settings(None)) as (url, app):
        async with aiohttp.ClientSession() as http:
            for headers in ({}, {"Authorization": "Bearer not-a-key"}):
                async with http.get(f"{url}/api/events", headers=headers) as response:
                    assert response.status == 401 and response.content_type == "application/json"
                    assert (await response.json())["error"]["code"] == "unauthorized"
        assert len(app[EVENT_STREAMS]) == 0


async def test_open_streams_are_limited_per_account_and_per_node():
    settings = with_events(metered_settings(None), max_per_account=2, max_per_node=3)
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            alice, bob = await create_account(admin, "alice", 10), await create_account(admin, "bob", 10)
        async with aiohttp.ClientSession() as http:

            async def status(key: str) -> tuple[int, str | None, aiohttp.ClientResponse]:
                response = await http.get(f"{url}/api/events", headers={"Authorization": f"Bearer {key}"})
                if response.status == 200:
                    return 200, None, response
                body = await response.json()
                response.release()
                return response.status, body["error"]["code"], response

            first, second = (await status(alice))[2], (await status(alice))[2]
            assert (await status(alice))[:2] == (429, "too_many_event_streams")
            kept = (await status(bob))[2]
            assert (await status(bob))[:2] == (503, "event_streams_full")
            # the accounts filled the node; the operator's places are its own (before: 503 here)
            operators = [await status(ADMIN) for _ in range(2)]
            assert [code for code, _, _ in operators] == [200, 200]
            assert (await status(ADMIN))[:2] == (429, "too_many_event_streams")  # the admin's own limit
            assert (await status(bob))[:2] == (503, "event_streams_full")  # the admin's took no account's place
            first.close()  # a place comes free once the server sees the connection closed
            await wait_until(lambda: len(app[EVENT_STREAMS]) == 4, timeout=5)
            again = await status(alice)
            assert again[0] == 200
            for response in (second, kept, again[2], *(response for _, _, response in operators)):
                response.close()
            await wait_until(lambda: len(app[EVENT_STREAMS]) == 0, timeout=5)


async def test_a_client_that_never_reads_is_dropped_and_its_buffer_stays_bounded():
    """A raw socket with a tiny receive buffer that never recv()s: once the kernel's buffers are
    full the server skips snapshots rather than buffer them, and drops the client after stall_s.
    Snapshots every 10 ms fill the buffers in seconds (once a second would take minutes)."""
    settings = with_events(loopback_settings(), interval_s=0.01, stall_s=2.0)
    async with running_server(settings) as (url, app):
        host, port = url.removeprefix("http://").split(":")
        reader = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        reader.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(reader, (host, int(port)))
            reader.send(f"GET /api/events HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            streams = app[EVENT_STREAMS]
            await wait_until(lambda: len(streams) == 1, timeout=5)
            started, most = time.monotonic(), 0
            while len(streams) and time.monotonic() - started < 120:
                most = max([most, *streams.buffered_bytes()])
                await asyncio.sleep(0.01)
            took = time.monotonic() - started
            print(f"dropped after {took:.1f} s; at most {most} bytes buffered in the server")
            assert len(streams) == 0, "the server still holds a client that reads nothing"
            # bounded: the limit and one snapshot past it (a local snapshot is under 2 KB)
            assert most <= MAX_BUFFERED_BYTES + 2 * 2048
            assert most > 0, "the kernel's buffers never filled: the test proved nothing"
        finally:
            reader.close()


async def test_the_server_shuts_down_with_streams_open():
    """aiohttp waits up to 60 s for handlers at shutdown: open streams must end at once."""
    started = None
    async with running_server(loopback_settings()) as (url, app):
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/api/events") as response:
                assert response.status == 200
                started = time.monotonic()
    assert time.monotonic() - started < 20  # the 60 s wait, with room for a slow machine's teardown


async def test_a_throttled_session_says_why():
    """A balance that lasts under slow_below_s: the meter slows the session, and its description
    (the snapshot's too) says so."""
    settings = metered_settings(None, slow_below_s=1e6, crawl_below_s=1.0)
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "carol", balance=50)
        async with FacefuseClient(url, api_key=key) as carol:
            session = await carol.connect(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            try:
                path = f"/api/sessions/{session.session_id}"

                async def throttled() -> dict | None:
                    return (await carol.request("GET", path))["throttle"]

                deadline = time.monotonic() + 15
                while (throttle := await throttled()) is None and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                assert throttle == {"level": "slow", "reason": "low_balance"}
                async with open_events(url, key) as events:
                    assert (await events.snapshot())["sessions"][0]["throttle"] == throttle
            finally:
                await session.close()


@pytest.mark.parametrize("direction", ["sendonly", "sendrecv"])  # OBS's, and a publisher that gets its video back
async def test_a_sessions_viewers_are_counted(direction):
    async with running_server(loopback_settings()) as (url, app), aiohttp.ClientSession() as http:
        pc, sdp = await offer_like_obs(
            ImageTrack(face_rgb("obama.jpg"), width=320, height=240), video_direction=direction
        )
        publisher = await post_offer(http, f"{url}/whip/live", pc, sdp)
        assert publisher.status == 201, publisher.body
        try:
            path = f"/api/sessions/{publisher.headers['X-Facefuse-Session']}"
            async with http.get(url + path) as response:
                assert (await response.json())["viewers"] == 0
            async with whep_viewer(http, f"{url}/whep/live") as viewer:
                assert viewer.status == 201, viewer.body
                await wait_until(lambda: viewer.video_frames >= 3, timeout=15)
                async with http.get(url + path) as response:
                    assert (await response.json())["viewers"] == 1
                async with open_events(url) as events:
                    snapshot = await events.snapshot()
                assert snapshot["sessions"][0]["viewers"] == 1
                (stream,) = snapshot["streams"]
                assert stream["stream"] == "live" and len(stream["viewers"]) == 1
            await wait_until(lambda: app[SESSIONS].viewers() == [], timeout=10)
            async with http.get(url + path) as response:
                assert (await response.json())["viewers"] == 0
        finally:
            await publisher.close()


@pytest.mark.redis
async def test_the_stream_goes_on_and_says_so_while_the_store_is_away(redis_server):
    async with running_server(metered_settings(redis_server.url)) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "erin", balance=10)
        async with open_events(url, key) as events, open_events(url, ADMIN) as operator:
            before = await events.snapshot()
            assert before["errors"] == [] and (await operator.snapshot())["node"]["quota_store"]["ok"] is True
            redis_server.stop(kill=True)
            stopped_at = time.time()
            during = await events.snapshot(after=stopped_at)
            # one Redis holds the tokens and the faces: both are said (a lone node asks no registry)
            assert sorted(during["errors"], key=lambda error: error["code"]) == [
                {
                    "code": "face_store_unavailable",
                    "message": "the face store is not answering: the face library may be stale",
                },
                {
                    "code": "quota_store_unavailable",
                    "message": "the token store is not answering: balances may be stale",
                },
            ]
            assert during["faces"] == before["faces"]  # the last list the store gave
            assert during["account"] == before["account"]  # the last balance the store gave
            node = (await operator.snapshot(after=stopped_at))["node"]
            assert node["quota_store"] == {"ok": False, "rtt_ms": None}
            assert node["ready"] is False and node["status"] == "quota store unavailable"
            assert "errors" in await events.snapshot()  # and it goes on
