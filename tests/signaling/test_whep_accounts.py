"""WHEP with accounts: who may play what. A view token plays its one stream and nothing else; an
account's API key plays the account's own streams; the camera page's /api/offer publishes under a
name too; GET /api/streams shows each stream live with its session and viewers."""

from __future__ import annotations

import aiohttp

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from signaling.app_keys import SESSIONS
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, loopback_settings, running_server, wait_until
from support.whep_viewer import whep_viewer
from support.whip_publisher import offer_like_obs, post_offer


def camera() -> ImageTrack:
    return ImageTrack(face_rgb("obama.jpg"), width=320, height=240)


async def test_view_tokens_play_only_their_stream_and_never_publish_or_read_the_api():
    async with running_server(metered_settings(None, chain="passthrough")) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            alice = await create_account(admin, "alice", 1000)
            bob = await create_account(admin, "bob", 1000)
        as_alice = {"Authorization": f"Bearer {alice}"}
        async with aiohttp.ClientSession() as http:
            pc, sdp = await offer_like_obs(camera())
            publisher = await post_offer(http, f"{url}/whip/cam", pc, sdp, headers=as_alice)
            try:
                assert publisher.status == 201, publisher.body
                async with http.post(f"{url}/api/streams/cam/view-tokens", headers=as_alice) as response:
                    token = (await response.json())["token"]
                async with whep_viewer(http, f"{url}/whep/cam", token=token) as viewer:
                    assert viewer.status == 201, viewer.body
                    assert "X-Facefuse-Session" not in viewer.headers, "the publisher's session id is the owner's"
                    await wait_until(lambda: viewer.video_frames >= 3, timeout=15)
                    async with http.get(f"{url}/api/streams", headers=as_alice) as response:
                        (stream,) = (await response.json())["streams"]
                    assert stream["stream"] == "cam" and stream["live"] and stream["view_tokens"] == 1
                    assert stream["session_id"] == publisher.headers["X-Facefuse-Session"]
                    assert [v["viewer_id"] for v in stream["viewers"]] == [viewer.headers["X-Facefuse-Viewer"]]
                    assert stream["viewers"][0]["frames_sent"] >= 3
                async with whep_viewer(http, f"{url}/whep/other", token=token) as elsewhere:
                    assert elsewhere.status == 401, elsewhere.body  # another stream's name
                async with whep_viewer(http, f"{url}/whep/cam", token=alice) as with_key:
                    assert with_key.status == 201, with_key.body  # the account's own key plays its own stream
                    assert with_key.headers["X-Facefuse-Session"] == publisher.headers["X-Facefuse-Session"]
                async with whep_viewer(http, f"{url}/whep/cam", token=bob) as other_account:
                    assert other_account.status == 409, other_account.body  # bob publishes no "cam"
                as_viewer = {"Authorization": f"Bearer {token}"}
                pc2, sdp2 = await offer_like_obs(camera())
                cannot_publish = await post_offer(http, f"{url}/whip/cam", pc2, sdp2, headers=as_viewer)
                await cannot_publish.close()
                assert cannot_publish.status == 401, cannot_publish.body
                async with http.get(f"{url}/api/sessions", headers=as_viewer) as response:
                    assert response.status == 401
                # the session is still alice's OBS: a refused viewer or publisher took nothing from it
                assert app[SESSIONS].get(publisher.headers["X-Facefuse-Session"]).state == "live"
            finally:
                await publisher.close()


async def test_the_camera_pages_session_published_by_name_can_be_watched():
    async with running_server(loopback_settings("invert")) as (url, app), aiohttp.ClientSession() as http:
        async with FacefuseClient(url) as client:
            session = await client.connect(camera(), options={"stream": "desk"})
            try:
                async with whep_viewer(http, f"{url}/whep/desk") as viewer:
                    assert viewer.status == 201, viewer.body
                    assert viewer.headers["X-Facefuse-Session"] == session.session_id
                    await wait_until(lambda: viewer.video_frames >= 3 and session.frames_received >= 3, timeout=15)
                    # one processed frame, two encoders: charged and counted once
                    live = app[SESSIONS].get(session.session_id)
                    assert live.stats.frames_out <= live.stats.frames_processed + live.stats.frames_failed
            finally:
                await session.close()
            async with http.post(
                f"{url}/api/offer", json={"type": "offer", "sdp": "v=0", "options": {"stream": "no/slash"}}
            ) as response:
                assert response.status == 400
                assert (await response.json())["error"]["code"] == "invalid_stream_name"
