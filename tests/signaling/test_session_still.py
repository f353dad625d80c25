"""GET /api/sessions/{id}/still: the dashboard's picture of a session not published under a stream
name. Real aiortc sessions through the real app with the invert chain, whose output is easy to tell
from its input."""

from __future__ import annotations

import aiohttp
import numpy as np

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from pipeline.images import decode_image
from signaling.app_keys import SESSIONS
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, running_server, wait_until
from support.whip_publisher import offer_like_obs, post_offer


async def still(url: str, session_id: str, api_key: str) -> tuple[int, aiohttp.ClientResponse, bytes]:
    headers = {"Authorization": f"Bearer {api_key}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.get(f"{url}/api/sessions/{session_id}/still") as response:
            return response.status, response, await response.read()


async def test_the_still_is_a_small_jpeg_of_what_the_client_receives_and_only_its_account_sees_it():
    async with running_server(metered_settings(None)) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            alice = await create_account(admin, "alice", balance=1000)
            bob = await create_account(admin, "bob", balance=1000)
        async with FacefuseClient(url, api_key=alice) as client:
            session = await client.connect(ImageTrack(face_rgb("obama.jpg"), width=640, height=480))
            await wait_until(lambda: session.frames_received >= 10, timeout=15)
            status, response, body = await still(url, session.session_id, alice)
            assert status == 200, body
            assert response.content_type == "image/jpeg"
            assert response.headers["Cache-Control"] == "no-store"
            picture, kind = decode_image(body)
            assert kind == "jpeg" and picture.shape == (240, 320, 3)  # at most 320 wide, the aspect kept
            received = session.received[-1].frame.reformat(width=320, height=240, format="rgb24").to_ndarray()
            sent = ImageTrack(face_rgb("obama.jpg"), width=320, height=240)
            original = (await sent.recv()).to_ndarray(format="rgb24")
            # the invert chain's colours: the still is the received picture, not the camera's
            assert np.abs(picture.astype(np.int16) - received).mean() < 20
            assert np.abs(picture.astype(np.int16) - original).mean() > 60

            status, _, body = await still(url, session.session_id, bob)
            assert status == 403, body
            status, _, body = await still(url, "no-such-session", alice)
            assert status == 404, body
            await session.close()


async def test_a_session_that_sent_nothing_on_yet_is_404_no_frame_yet():
    async with running_server(metered_settings(None)) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            key = await create_account(admin, "obs", balance=1000)
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {key}"}) as http:
            # OBS's sendonly offer with no viewer: its frames arrive, none is processed or sent on
            pc, sdp = await offer_like_obs(ImageTrack(face_rgb("obama.jpg"), width=320, height=240))
            publisher = await post_offer(http, f"{url}/whip/live", pc, sdp)
            try:
                assert publisher.status == 201, publisher.body
                session_id = publisher.headers["X-Facefuse-Session"]
                await wait_until(lambda: app[SESSIONS].get(session_id).stats.frames_in >= 5, timeout=15)
                status, _, body = await still(url, session_id, key)
                assert status == 404 and b"no_frame_yet" in body, body
            finally:
                await publisher.close()
