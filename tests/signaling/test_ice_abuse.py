"""What a client may ask of the server's ICE agent (stream/trickle.py, stream/ice.py), against the
real app with aiortc peers: a bounded number of remote candidates per connection, offered and
trickled together; a bounded number of PATCHes; none after the connect deadline; and, on a server
whose ICE host is not loopback, no candidates in special ranges it does not itself sit in.
Before: an offer of 300 candidates 127.0.x.y and two PATCHes of 150 more were taken, and the node
sent 4,200 binding requests at them."""

from __future__ import annotations

import asyncio
import dataclasses

import aiohttp

from client.image_track import ImageTrack
from signaling.app_keys import SESSIONS
from stream.ice import IceSettings, address_allowed, allowed_remote_networks
from stream.trickle import MAX_REMOTE_CANDIDATES, MAX_TRICKLE_PATCHES
from support.server import face_rgb, loopback_settings, running_server, wait_until
from support.whip_publisher import offer_like_obs, post_offer

TRICKLE = "application/trickle-ice-sdpfrag"


def candidates(count: int, start: int = 0) -> list[str]:
    """Host candidates on loopback addresses nobody listens on (127.0.x.y:40123)."""
    return [
        f"a=candidate:{n} 1 udp 2130706431 127.0.{n // 250}.{n % 250 + 2} 40123 typ host"
        for n in range(start, start + count)
    ]


def with_candidates(sdp: str, lines: list[str]) -> str:
    """The offer with `lines` after its first media section's mid."""
    out = []
    for line in sdp.splitlines():
        out.append(line)
        if line.startswith("a=mid:") and lines:
            out += lines
            lines = []
    return "\r\n".join(out) + "\r\n"


def camera() -> ImageTrack:
    return ImageTrack(face_rgb("obama.jpg"), width=320, height=240)


async def test_an_offer_naming_more_candidates_than_a_connection_may_is_refused():
    async with running_server(loopback_settings("passthrough")) as (url, app), aiohttp.ClientSession() as http:
        pc, sdp = await offer_like_obs(camera())
        flooded = await post_offer(http, f"{url}/whip/cam", pc, with_candidates(sdp, candidates(300)))
        await flooded.close()
        assert flooded.status == 400 and '"too_many_candidates"' in flooded.body, flooded.body
        assert app[SESSIONS].all() == []
        pc, sdp = await offer_like_obs(camera())
        enough = await post_offer(http, f"{url}/whip/cam", pc, with_candidates(sdp, candidates(MAX_REMOTE_CANDIDATES)))
        await enough.close()
        assert enough.status == 201, enough.body


async def test_trickle_patches_are_bounded_in_candidates_in_number_and_in_time():
    settings = loopback_settings("passthrough")
    deadline_s = 3.0
    settings = dataclasses.replace(settings, stream=dataclasses.replace(settings.stream, idle_timeout_s=deadline_s))
    async with running_server(settings) as (url, app), aiohttp.ClientSession() as http:
        pc, sdp = await offer_like_obs(camera())
        publisher = await post_offer(http, f"{url}/whip/cam", pc, sdp)
        try:
            assert publisher.status == 201, publisher.body
            answered_at = asyncio.get_running_loop().time()
            session_url, etag = url + publisher.location, publisher.headers["ETag"]

            async def patch(lines: list[str], if_match: str = etag) -> tuple[int, str]:
                body = "m=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:1\r\n" + "".join(f"{line}\r\n" for line in lines)
                headers = {"Content-Type": TRICKLE, "If-Match": if_match}
                async with http.patch(session_url, data=body.encode(), headers=headers) as response:
                    text = await response.text()
                    return response.status, text

            status, body = await patch(candidates(150))
            assert status == 400 and '"too_many_candidates"' in body, body
            assert (await patch(candidates(MAX_REMOTE_CANDIDATES)))[0] == 204  # the connection's whole allowance
            status, body = await patch(candidates(1, start=MAX_REMOTE_CANDIDATES))
            assert status == 400 and '"too_many_candidates"' in body, body
            # an If-Match list holding this ETag is this ETag (RFC 9110); before: 412
            assert (await patch([], if_match=f'"stale", {etag}'))[0] == 204
            statuses = [(await patch([]))[0] for _ in range(MAX_TRICKLE_PATCHES)]
            assert statuses[-1] == 429 and statuses.count(204) == MAX_TRICKLE_PATCHES - 2, statuses

            # the publisher is live, and past the connect deadline a PATCH is refused
            session = app[SESSIONS].get(publisher.headers["X-Facefuse-Session"])
            await wait_until(lambda: session.state == "live", timeout=10)
            await asyncio.sleep(max(0.0, answered_at + deadline_s + 0.2 - asyncio.get_running_loop().time()))
            assert session.state == "live"
            status, body = await patch([])
            assert status == 409 and '"trickle_too_late"' in body, body
        finally:
            await publisher.close()


def test_a_server_whose_ice_host_is_not_loopback_takes_public_candidates_and_its_own_range_only():
    networks = allowed_remote_networks(IceSettings(hosts=("10.1.2.3",)))
    allowed = {host: address_allowed(host, networks) for host in ("8.8.8.8", "2001:4860::8888", "10.200.0.1")}
    refused = {host: address_allowed(host, networks) for host in ("127.0.0.5", "192.168.1.1", "169.254.1.1", "::1")}
    assert all(allowed.values()) and not any(refused.values()), (allowed, refused)
    public_only = allowed_remote_networks(IceSettings(hosts=("203.0.114.7",)))  # a public host
    assert not any(address_allowed(host, public_only) for host in ("10.0.0.1", "127.0.0.1", "172.16.0.1"))
    assert address_allowed("1.1.1.1", public_only)
