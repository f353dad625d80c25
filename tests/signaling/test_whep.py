"""WHEP playback: viewers of a stream published over WHIP get its processed video (and audio),
in-process against a real server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses

import aiohttp
import numpy as np

from client.image_track import ImageTrack
from signaling.app_keys import SESSIONS
from support.server import face_rgb, loopback_settings, running_server, wait_until
from support.whep_viewer import whep_viewer
from support.whip_publisher import offer_like_obs, post_offer


def camera() -> ImageTrack:
    return ImageTrack(face_rgb("obama.jpg"), width=320, height=240)


async def publish(http: aiohttp.ClientSession, url: str, stream: str = "live", direction: str = "sendonly"):
    pc, sdp = await offer_like_obs(camera(), video_direction=direction)
    publisher = await post_offer(http, f"{url}/whip/{stream}", pc, sdp)
    assert publisher.status == 201, publisher.body
    return publisher


async def test_a_viewer_plays_the_processed_video_and_the_audio_of_an_obs_publisher():
    async with running_server(loopback_settings("invert")) as (url, app), aiohttp.ClientSession() as http:
        publisher = await publish(http, url)  # sendonly, as OBS: nothing comes back to it
        try:
            session = app[SESSIONS].get(publisher.headers["X-Facefuse-Session"])
            await wait_until(lambda: session.stats.frames_in >= 5, timeout=15)
            assert session.stats.frames_processed == 0  # no one watches: nothing processed, nothing charged
            async with whep_viewer(http, f"{url}/whep/live") as viewer:
                assert viewer.status == 201, viewer.body
                assert viewer.headers["Location"] == f"/whep/live/{viewer.headers['X-Facefuse-Viewer']}"
                assert viewer.headers["ETag"].startswith('"')
                await wait_until(lambda: viewer.video_frames >= 10 and viewer.audio_frames >= 10, timeout=15)
                # the invert chain's output: the camera's face photo, inverted
                original = (await camera().recv()).to_ndarray(format="rgb24").astype(np.int16)
                shown = viewer.last_video.to_ndarray(format="rgb24").astype(np.int16)
                assert np.abs((255 - original) - shown).mean() < 30
                assert session.stats.frames_processed >= 10
                assert session.stats.frames_charged <= session.stats.frames_processed
            await wait_until(lambda: app[SESSIONS].viewers() == [], timeout=10)
        finally:
            await publisher.close()


async def test_nothing_published_is_409_with_retry_after_and_an_unknown_viewer_is_404():
    async with running_server(loopback_settings("passthrough")) as (url, _), aiohttp.ClientSession() as http:
        async with whep_viewer(http, f"{url}/whep/nobody") as viewer:
            assert viewer.status == 409, viewer.body
            assert viewer.headers["Retry-After"] == "1"
            assert '"stream_not_live"' in viewer.body
        async with http.delete(f"{url}/whep/nobody/no-such-viewer") as response:
            assert response.status == 404
        async with http.post(f"{url}/whep/bad.name", data=b"v=0", headers={"Content-Type": "application/sdp"}) as r:
            assert r.status == 400


async def test_a_viewer_offer_that_sends_media_is_refused():
    async with running_server(loopback_settings("passthrough")) as (url, _), aiohttp.ClientSession() as http:
        publisher = await publish(http, url)
        try:
            pc, sdp = await offer_like_obs(camera())  # a publisher's offer, sent to WHEP
            async with http.post(f"{url}/whep/live", data=sdp, headers={"Content-Type": "application/sdp"}) as r:
                assert r.status == 400
                assert "recvonly" in (await r.json())["error"]["message"]
            await pc.close()
        finally:
            await publisher.close()


async def test_the_viewers_end_with_the_publisher_and_a_new_publisher_can_be_watched():
    async with running_server(loopback_settings("passthrough")) as (url, app), aiohttp.ClientSession() as http:
        first = await publish(http, url)
        try:
            async with whep_viewer(http, f"{url}/whep/live") as viewer:
                assert viewer.status == 201, viewer.body
                await wait_until(lambda: viewer.video_frames >= 3, timeout=15)
                second = await publish(http, url)  # OBS reconnecting: replaces the first
                try:
                    await wait_until(lambda: viewer.pc.connectionState in ("closed", "failed"), timeout=15)
                    assert app[SESSIONS].viewers() == []
                    async with whep_viewer(http, f"{url}/whep/live") as again:
                        assert again.status == 201
                        assert again.headers["X-Facefuse-Session"] == second.headers["X-Facefuse-Session"]
                        await wait_until(lambda: again.video_frames >= 3, timeout=15)
                finally:
                    await second.close()
        finally:
            await first.close()


async def test_trickle_patch_and_its_etag_rules_on_a_viewer():
    async with running_server(loopback_settings("passthrough")) as (url, _), aiohttp.ClientSession() as http:
        publisher = await publish(http, url)
        try:
            async with whep_viewer(http, f"{url}/whep/live") as viewer:
                location, etag = url + viewer.location, viewer.headers["ETag"]
                fragment = "a=end-of-candidates\r\n"
                kind = {"Content-Type": "application/trickle-ice-sdpfrag"}
                async with http.patch(location, data=fragment, headers=kind) as response:
                    assert response.status == 428
                async with http.patch(location, data=fragment, headers={**kind, "If-Match": '"stale"'}) as response:
                    assert response.status == 412
                restart = "a=ice-ufrag:new1\r\na=ice-pwd:newpasswordnewpassword12\r\n"
                async with http.patch(location, data=restart, headers={**kind, "If-Match": etag}) as response:
                    assert response.status == 422
                async with http.patch(location, data=fragment, headers={**kind, "If-Match": etag}) as response:
                    assert response.status == 204
                    assert response.headers["ETag"] == etag
        finally:
            await publisher.close()


async def test_twenty_viewers_on_one_stream_and_the_limit_past_them():
    settings = loopback_settings("passthrough")
    settings = dataclasses.replace(settings, stream=dataclasses.replace(settings.stream, max_viewers_per_stream=20))
    async with running_server(settings) as (url, app), aiohttp.ClientSession() as http:
        publisher = await publish(http, url)
        try:
            async with contextlib.AsyncExitStack() as stack:
                viewers = [
                    await stack.enter_async_context(whep_viewer(http, f"{url}/whep/live", audio=False))
                    for _ in range(20)
                ]
                assert [v.status for v in viewers] == [201] * 20
                async with whep_viewer(http, f"{url}/whep/live") as one_too_many:
                    assert one_too_many.status == 503, one_too_many.body
                    assert "Retry-After" in one_too_many.headers
                await wait_until(lambda: all(v.video_frames >= 3 for v in viewers), timeout=60)
                assert len(app[SESSIONS].viewers()) == 20
            await wait_until(lambda: app[SESSIONS].viewers() == [], timeout=15)
        finally:
            await publisher.close()


async def test_a_viewer_that_never_reads_does_not_lower_the_publishers_fps():
    """The publisher gets its video back (sendrecv) at some fps alone; a viewer whose tracks are
    never read must not lower it (each encoder has its own slot; nothing waits on a viewer)."""
    async with running_server(loopback_settings("passthrough")) as (url, app), aiohttp.ClientSession() as http:
        publisher = await publish(http, url, direction="sendrecv")
        try:
            await wait_until(lambda: publisher.frames_received >= 10, timeout=15)
            alone = await frames_in(publisher, 3.0)
            async with whep_viewer(http, f"{url}/whep/live", read=False) as viewer:
                assert viewer.status == 201
                await wait_until(lambda: app[SESSIONS].viewers()[0].frames_sent >= 10, timeout=15)
                watched = await frames_in(publisher, 3.0)
            assert watched >= 0.6 * alone, (alone, watched)
        finally:
            await publisher.close()


async def frames_in(publisher, seconds: float) -> int:
    before = publisher.frames_received
    await asyncio.sleep(seconds)
    return publisher.frames_received - before


async def test_a_delete_after_the_connection_ended_is_200_not_404():
    """whip.js closes its peer connection before it sends DELETE: the server has ended the session
    by then, and the DELETE must still say the stop worked (for a viewer as for a publisher)."""
    async with running_server(loopback_settings("passthrough")) as (url, app), aiohttp.ClientSession() as http:
        publisher = await publish(http, url)
        session_id = publisher.headers["X-Facefuse-Session"]
        async with whep_viewer(http, f"{url}/whep/live") as viewer:
            await wait_until(lambda: viewer.video_frames >= 3, timeout=15)
            await publisher.close()  # the connection goes first; the session and its viewer end with it
            await wait_until(lambda: app[SESSIONS].all() == [] and app[SESSIONS].viewers() == [], timeout=15)
            async with http.delete(url + publisher.location) as response:
                assert response.status == 200
                assert (await response.json())["session_id"] == session_id
            async with http.delete(url + viewer.location) as response:
                assert response.status == 200
                assert (await response.json())["viewer_id"] == viewer.headers["X-Facefuse-Viewer"]
            async with http.delete(f"{url}/whip/other/{session_id}") as response:
                assert response.status == 404  # under another stream name it is still unknown
