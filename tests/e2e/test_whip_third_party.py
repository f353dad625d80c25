"""A WHIP client we did not write (medooze's whip.js in headless Chromium: it posts an offer
without candidates and trickles them all with PATCH) publishes to a server process; an aiortc WHEP
viewer receives the processed video back; the client's stop() DELETEs the session away.
Why whip.js and not Debian's simple-whip-client: support/third_party_whip.py."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from support.browser import ServerProcess, face_path, live_sessions, served
from support.frame_likeness import INVERTED_R, correlation, first_frame
from support.server import wait_until
from support.third_party_whip import ThirdPartyWhipClient, whip_js_publisher
from support.whep_viewer import whep_viewer

pytestmark = pytest.mark.browser

STREAM = "third-party"


def what_happened(client: ThirdPartyWhipClient, server: ServerProcess) -> str:
    return f"\n{client.output()}\nserver log:\n{server.log_tail()}"


def the_session(server: ServerProcess, session_id: str) -> dict | None:
    return next((s for s in live_sessions(server) if s["session_id"] == session_id), None)


async def test_whip_js_publishes_trickles_is_watched_over_whep_and_its_stop_ends_the_session(tmp_path: Path) -> None:
    with served(tmp_path / "server.log", chain="invert") as server:
        with whip_js_publisher(f"{server.base_url}/whip/{STREAM}", face_path("obama.jpg"), tmp_path) as client:
            session_id = client.resource.rsplit("/", 1)[-1]
            assert client.resource == f"{server.base_url}/whip/{STREAM}/{session_id}", what_happened(client, server)

            # frames arrive: the session is listed, live, and its frames_in grows
            await wait_until(lambda: (the_session(server, session_id) or {}).get("state") == "live", timeout=15)
            first = the_session(server, session_id)["frames_in"]
            await wait_until(lambda: the_session(server, session_id)["frames_in"] >= first + 10, timeout=10)

            # the trickled candidates were taken: every PATCH 204 (whip.js sends one per batch of
            # candidates, the last with end-of-candidates), and its peer connection is up
            requests = server.requests("/whip/")
            assert ("POST", f"/whip/{STREAM}", 201) in requests, requests
            patches = [r for r in requests if r[0] == "PATCH"]
            assert patches and all(r == ("PATCH", f"/whip/{STREAM}/{session_id}", 204) for r in patches), (
                f"{patches}{what_happened(client, server)}"
            )
            assert await asyncio.to_thread(client.connection_state) == "connected", what_happened(client, server)

            # watched back over WHEP by an aiortc viewer
            async with aiohttp.ClientSession() as http, whep_viewer(http, f"{server.base_url}/whep/{STREAM}") as viewer:
                assert viewer.status == 201, f"{viewer.body}{what_happened(client, server)}"
                await wait_until(lambda: viewer.video_frames >= 10, timeout=15)
                # the invert chain's negative of the camera, not the publisher's own picture
                r = correlation(viewer.last_video, first_frame(client.camera_clip))
                print(f"\nthe viewer's frame against the camera's: r = {r:.2f}")
                assert r < INVERTED_R, f"the viewer's frame against the camera's: r = {r:.2f}"

                # the client's own stop(): it closes its peer connection, then DELETEs. The server
                # may see the connection close first and end the session itself: that DELETE is
                # then 404 (session_not_found), harmless to whip.js, which ignores its status
                await asyncio.to_thread(client.stop)
                await wait_until(lambda: the_session(server, session_id) is None, timeout=5)
                deletes = [r for r in server.requests("/whip/") if r[0] == "DELETE"]
                assert deletes in (
                    [("DELETE", f"/whip/{STREAM}/{session_id}", 200)],
                    [("DELETE", f"/whip/{STREAM}/{session_id}", 404)],
                ), f"{deletes}{what_happened(client, server)}"
                print(f"\nwhip.js stop(): DELETE {deletes[0][2]}, {server.closing_reason(session_id)}")
                await wait_until(lambda: viewer.pc.connectionState in ("closed", "failed"), timeout=10)
            assert live_sessions(server) == []


async def test_a_whip_js_client_that_vanishes_without_delete_is_ended_when_its_video_stops(tmp_path: Path) -> None:
    with served(tmp_path / "server.log", chain="invert") as server:
        with whip_js_publisher(f"{server.base_url}/whip/{STREAM}", face_path("obama.jpg"), tmp_path) as client:
            session_id = client.resource.rsplit("/", 1)[-1]
            await wait_until(lambda: (the_session(server, session_id) or {}).get("state") == "live", timeout=15)
        # the browser quit with the session live: no DELETE was sent
        assert not [r for r in server.requests("/whip/") if r[0] == "DELETE"]
        # a killed browser says nothing: the idle timeout (10 s) ends it, unless the lost ICE
        # consent does first; 40 s leaves a slow machine its margin
        await wait_until(lambda: the_session(server, session_id) is None, timeout=40)
        reason = server.closing_reason(session_id)
        print(f"\nsession ended without DELETE: {reason}")
        assert reason is not None and reason.startswith(("no video for", "connection ")), server.log_tail()
