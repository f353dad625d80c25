"""A WHIP publisher shaped as OBS (its offer: no candidates, Opus 111, H.264 42e01f on 96, no RTX)
streams through the server and gets the processed video back; DELETE ends it on both sides."""

import aiohttp

from client.image_track import ImageTrack
from client.still_picture import fitted_i420
from signaling.app_keys import SESSIONS
from support.frame_likeness import INVERTED_R, correlation, i420_frame
from support.server import face_rgb, loopback_settings, running_server, wait_until
from support.whip_publisher import offer_like_obs, post_offer


async def test_an_obs_shaped_publisher_gets_the_processed_video_back_and_delete_ends_it():
    async with running_server(loopback_settings("invert")) as (url, app), aiohttp.ClientSession() as http:
        pc, sdp = await offer_like_obs(
            ImageTrack(face_rgb("obama.jpg"), width=320, height=240), video_direction="sendrecv"
        )
        publisher = await post_offer(http, f"{url}/whip/live?swap=largest", pc, sdp)
        try:
            print(f"\nWHIP POST -> 201: {publisher.answered_in_s * 1000:.0f} ms (invert chain)")
            assert publisher.status == 201, publisher.body
            session = app[SESSIONS].get(publisher.headers["X-Facefuse-Session"])
            assert session.options == {"swap": "largest"}
            await wait_until(lambda: publisher.frames_received >= 10, timeout=15)
            assert session.stats.frames_processed >= 10 and session.stats.codec.upper() == "H264"
            # what came back is the invert chain's negative of what was sent, not the publisher's own picture
            r = correlation(publisher.last_video, i420_frame(fitted_i420(face_rgb("obama.jpg"), 320, 240)))
            print(f"returned frame against the sent one: r = {r:.2f}")
            assert r < INVERTED_R, f"returned frame against the sent one: r = {r:.2f}"
            async with http.delete(url + publisher.location) as response:
                assert response.status == 200
            assert session.state == "closed" and app[SESSIONS].all() == []
            await wait_until(lambda: pc.connectionState in ("closed", "failed"), timeout=15)
        finally:
            await publisher.close()
