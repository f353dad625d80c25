"""WHIP ingest (RFC 9725) against the real app: an offer shaped as OBS's, the answer's headers,
trickle PATCH, DELETE, a second publisher on a name, and every refusal with its status."""

import dataclasses
import json

import aiohttp
import pytest

from client.facefuse_client import FacefuseClient
from client.image_track import ImageTrack
from signaling.app_keys import SESSIONS
from signaling.webrtc_http import ice_server_links
from support.metering import ADMIN, create_account, metered_settings
from support.server import face_rgb, loopback_settings, running_server, wait_until
from support.whip_publisher import offer_like_obs, post_offer

HIGH_PROFILE = "profile-level-id=640c1f"


def camera() -> ImageTrack:
    return ImageTrack(face_rgb("obama.jpg"), width=320, height=240)


@pytest.fixture
async def server():
    async with running_server(loopback_settings()) as (url, app):
        async with aiohttp.ClientSession() as http:
            yield url, app, http


async def error_of(response: aiohttp.ClientResponse) -> tuple[int, str]:
    body = await response.json()
    assert body["error"]["message"]  # a message a person can read
    return response.status, body["error"]["code"]


async def test_an_obs_shaped_offer_without_candidates_is_answered_201_and_goes_live(server):
    url, app, http = server
    pc, sdp = await offer_like_obs(camera())
    assert "a=candidate" not in sdp and "rtx" not in sdp and "a=rtpmap:111 opus/48000/2" in sdp
    assert "a=rtpmap:96 H264/90000" in sdp and "a=rtcp-fb:96 ccm fir" in sdp
    publisher = await post_offer(http, f"{url}/whip/my-show", pc, sdp)
    try:
        print(f"\nWHIP POST -> 201: {publisher.answered_in_s * 1000:.0f} ms (passthrough chain)")
        assert publisher.status == 201, publisher.body
        assert publisher.headers["Content-Type"] == "application/sdp"
        assert publisher.body.startswith("v=0")
        session_id = publisher.headers["X-Facefuse-Session"]
        assert publisher.location == f"/whip/my-show/{session_id}"
        etag = publisher.headers["ETag"]
        assert etag.startswith('"') and etag.endswith('"') and len(etag) > 10  # strong: no W/
        assert publisher.links == []  # no --ice-server given
        # the server learns the publisher's address from its checks (peer-reflexive) and frames arrive
        session = app[SESSIONS].get(session_id)
        await wait_until(lambda: session.state == "live" and session.stats.frames_in >= 5, timeout=10)
        listed = [s["session_id"] for s in (await (await http.get(f"{url}/api/sessions")).json())["sessions"]]
        assert listed == [session_id]

        async with http.delete(url + publisher.location) as response:
            assert response.status == 200
            assert (await response.json())["session_id"] == session_id
        assert app[SESSIONS].all() == [] and app[SESSIONS].streams.find(session.account_id, "my-show") is None
        async with http.delete(url + publisher.location) as response:  # again: it ended, and says how
            assert response.status == 200
            assert (await response.json())["close_reason"] == "ended by its WHIP client"
    finally:
        await publisher.close()


async def test_options_says_what_post_takes(server):
    url, _, http = server
    async with http.options(f"{url}/whip/my-show") as response:
        assert response.status == 204
        assert response.headers["Accept-Post"] == "application/sdp"


async def test_a_second_publisher_on_a_name_replaces_the_first(server):
    url, app, http = server
    first_pc, first_sdp = await offer_like_obs(camera())
    first = await post_offer(http, f"{url}/whip/show", first_pc, first_sdp)
    second_pc, second_sdp = await offer_like_obs(camera())
    try:
        first_session = app[SESSIONS].get(first.headers["X-Facefuse-Session"])
        second = await post_offer(http, f"{url}/whip/show", second_pc, second_sdp)
        assert second.status == 201, second.body
        assert first_session.state == "closed" and "new publisher" in first_session.close_reason
        assert [s.id for s in app[SESSIONS].all()] == [second.headers["X-Facefuse-Session"]]
        publication = app[SESSIONS].streams.find(first_session.account_id, "show")
        assert publication.session_id == second.headers["X-Facefuse-Session"]
        # the replaced session's DELETE (OBS stopping its old connection late) says it ended, and
        # ends nothing else
        async with http.delete(url + first.location) as response:
            assert response.status == 200
            assert "new publisher" in (await response.json())["close_reason"]
        assert [s.id for s in app[SESSIONS].all()] == [second.headers["X-Facefuse-Session"]]
        await second.close()
    finally:
        await first.close()


async def test_another_name_is_another_session(server):
    url, app, http = server
    publishers = []
    try:
        for name in ("a", "b"):
            pc, sdp = await offer_like_obs(camera())
            publishers.append(await post_offer(http, f"{url}/whip/{name}", pc, sdp))
        assert [p.status for p in publishers] == [201, 201]
        assert len(app[SESSIONS].all()) == 2
        # a session's URL is under its own stream name only
        other = publishers[0].location.replace("/whip/a/", "/whip/b/")
        async with http.delete(url + other) as response:
            assert response.status == 404
    finally:
        for publisher in publishers:
            await publisher.close()


def _with_video_codec_line(sdp: str, old: str, new: str) -> str:
    assert old in sdp
    return sdp.replace(old, new)


@pytest.mark.parametrize(
    "path, content_type, body, expected",
    [
        ("/whip/show", "application/json", "offer", (415, "unsupported_media_type")),
        ("/whip/" + "x" * 65, "application/sdp", "offer", (400, "invalid_stream_name")),
        ("/whip/no%20spaces", "application/sdp", "offer", (400, "invalid_stream_name")),
        ("/whip/show", "application/sdp", "not an sdp", (400, "invalid_sdp")),
        ("/whip/show", "application/sdp", "audio only", (400, "invalid_sdp")),
        ("/whip/show", "application/sdp", "high profile", (422, "unsupported_codec")),
        ("/whip/show", "application/sdp", "offer past 65,536 characters", (400, "invalid_sdp")),  # was 131,072
        ("/whip/show?face_id=nope", "application/sdp", "offer", (404, "face_not_found")),
        ("/whip/show?fps=60", "application/sdp", "offer", (400, "invalid_query")),
        ("/whip/show?swap=some", "application/sdp", "offer", (400, "invalid_body")),
        (
            "/whip/show?swap=reference&reference_face_id=x&reference_threshold=a",
            "application/sdp",
            "offer",
            (400, "invalid_query"),
        ),
    ],
)
async def test_refusals(server, path, content_type, body, expected):
    url, app, http = server
    pc, sdp = await offer_like_obs(camera())
    await pc.close()
    if body == "audio only":
        body = sdp[: sdp.index("m=video")].replace("a=group:BUNDLE 0 1", "a=group:BUNDLE 0")
    elif body == "high profile":
        body = _with_video_codec_line(sdp, "profile-level-id=42e01f", HIGH_PROFILE)
    elif body == "offer":
        body = sdp
    elif body == "offer past 65,536 characters":
        body = sdp + "a=x-padding:" + "x" * (65_536 - len(sdp)) + "\r\n"
    async with http.post(url + path, data=body.encode(), headers={"Content-Type": content_type}) as response:
        status, code = await error_of(response)
        message = (await response.json())["error"]["message"]
    assert (status, code) == expected, message
    if code == "unsupported_codec":  # says what would work, and names what was offered
        assert "constrained baseline" in message and "640c1f" in message
    assert app[SESSIONS].all() == []


async def test_patch_trickles_candidates_and_refuses_what_rfc_9725_says(server):
    url, app, http = server
    pc, sdp = await offer_like_obs(camera())
    publisher = await post_offer(http, f"{url}/whip/show", pc, sdp)
    try:
        assert publisher.status == 201
        session_url, etag = url + publisher.location, publisher.headers["ETag"]
        ufrag = next(line for line in sdp.splitlines() if line.startswith("a=ice-ufrag:"))
        pwd = next(line for line in sdp.splitlines() if line.startswith("a=ice-pwd:"))
        candidate = next(line for line in pc.localDescription.sdp.splitlines() if line.startswith("a=candidate:"))
        fragment = (
            # under the video's mid: a section bundled with the audio's, whose transport carries both
            f"{ufrag}\r\n{pwd}\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:1\r\n{candidate}\r\na=end-of-candidates\r\n"
        )
        trickle = {"Content-Type": "application/trickle-ice-sdpfrag"}

        async def patch(body: str, headers: dict[str, str]) -> aiohttp.ClientResponse:
            async with http.patch(session_url, data=body.encode(), headers=headers) as response:
                await response.read()
                return response

        response = await patch(fragment, trickle)
        assert response.status == 428
        response = await patch(fragment, {**trickle, "If-Match": '"stale"'})
        assert response.status == 412
        response = await patch(fragment, {"Content-Type": "application/sdp", "If-Match": etag})
        assert response.status == 415
        restart = fragment.replace(ufrag, "a=ice-ufrag:0ther").replace(pwd, "a=ice-pwd:" + "n" * 24)
        response = await patch(restart, {**trickle, "If-Match": "*"})
        assert response.status == 422
        response = await patch(fragment + "a=x\r\n" * 5000, {**trickle, "If-Match": etag})
        assert response.status == 400  # far larger than a fragment
        # a candidate this server will not try (not loopback here) is left out, as in an offer
        outside = candidate.replace("127.0.0.1", "192.0.2.1")
        response = await patch(
            f"{ufrag}\r\n{pwd}\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\n{outside}\r\n",
            {**trickle, "If-Match": etag},
        )
        assert response.status == 204
        response = await patch(fragment, {**trickle, "If-Match": etag})
        assert response.status == 204 and response.headers["ETag"] == etag
        response = await patch(fragment, {**trickle, "If-Match": etag})  # after end-of-candidates: ignored, no 500
        assert response.status == 204
        async with http.patch(session_url + "x", data=fragment.encode(), headers={**trickle, "If-Match": etag}) as r:
            assert r.status == 404
        # the trickled candidate reached the session's ICE transport (the outside one did not)
        session = app[SESSIONS].get(publisher.headers["X-Facefuse-Session"])
        await wait_until(lambda: session.stats.frames_in >= 3, timeout=10)
        port = int(candidate.split()[5])
        remote = session._pc.getTransceivers()[0].receiver.transport.transport.getRemoteCandidates()
        assert [(c.type, c.ip, c.port) for c in remote if c.type == "host"] == [("host", "127.0.0.1", port)]
    finally:
        await publisher.close()


def test_links_name_the_configured_ice_servers_with_turn_credentials():
    links = ice_server_links(("stun:stun.example.net:3478", "turn:us%22er:p%40ss@turn.example.net:3478?transport=udp"))
    assert links == [
        '<stun:stun.example.net:3478>; rel="ice-server"',
        '<turn:turn.example.net:3478?transport=udp>; rel="ice-server"; username="us\\"er"; credential="p@ss"; '
        'credential-type="password"',
    ]


async def test_statuses_with_accounts():
    """401 without a key, 403 on another account's session, 402 with nothing to spend, 429 past the
    tier's sessions (but a reconnect to the same name is no new session), 503 when the server is full."""
    settings = metered_settings(None, chain="passthrough")
    settings = dataclasses.replace(settings, stream=dataclasses.replace(settings.stream, max_sessions=2))
    async with running_server(settings) as (url, app):
        async with FacefuseClient(url, api_key=ADMIN) as admin:
            free = await create_account(admin, "free-one", 0, tier="free")
            broke = await create_account(admin, "broke", 0, tier="paid")
            other = await create_account(admin, "other", 100, tier="paid")
        publishers = []

        async def publish(name: str, key: str | None) -> tuple[int, str | None]:
            pc, sdp = await offer_like_obs(camera())
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            async with aiohttp.ClientSession() as http:
                publisher = await post_offer(http, f"{url}/whip/{name}", pc, sdp, headers=headers)
            publishers.append(publisher)
            code = None if publisher.status == 201 else json.loads(publisher.body)["error"]["code"]
            if publisher.status in (429, 503):
                assert int(publisher.headers["Retry-After"]) > 0
            return publisher.status, code

        try:
            assert await publish("show", None) == (401, "unauthorized")
            assert await publish("show", "not-a-key") == (401, "unauthorized")
            assert (await publish("show", broke))[0] == 402
            assert await publish("show", free) == (201, None)
            assert (await publish("second", free))[0] == 429  # the free tier's one session
            assert await publish("show", free) == (201, None)  # OBS reconnecting: replaces, not refused
            assert await publish("show", other) == (201, None)  # another account's name space
            assert (await publish("third", other))[0] == 503  # two sessions: full
            # another account's session: 403, as for /api/sessions
            async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {other}"}) as http:
                async with http.delete(url + publishers[5].location) as response:
                    assert response.status == 403
        finally:
            for publisher in publishers:
                await publisher.close()
