"""The WHIP/WHEP POST of `facefuse cam` follows 307/308 itself, as OBS does: same method, body and
Bearer token on the next server (aiohttp drops the token when a redirect changes the origin), a
relative Location resolved against the URL that answered it, the session URL against the final
server, and a bounded number of hops."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from client.cam.errors import CamError, ServerRefusal
from client.cam.whip_http import MAX_REDIRECTS, delete_resource, post_offer

OFFER = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"


@contextlib.asynccontextmanager
async def serving(handler) -> AsyncIterator[tuple[str, list[web.Request]]]:
    """An HTTP server on 127.0.0.1 and a free port answering every request with `handler`; yields
    (base_url, the requests it saw, each with its body read)."""
    seen: list[tuple[web.Request, str]] = []

    async def record(request: web.Request) -> web.StreamResponse:
        seen.append((request, await request.text()))
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/"), seen
    finally:
        await server.close()


def answer_201(location: str):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(
            status=201, text="answer-sdp", content_type="application/sdp", headers={"Location": location}
        )

    return handler


def redirect(status: int, location: str):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(status=status, headers={"Location": location})

    return handler


@pytest.mark.parametrize("status", [307, 308])
async def test_a_redirect_to_another_server_keeps_the_method_the_body_and_the_token(status):
    async with serving(answer_201("/whip/live/session-1")) as (node, at_node):
        async with serving(redirect(status, f"{node}/whip/live?via=lb")) as (balancer, at_balancer):
            async with aiohttp.ClientSession() as http:
                answer = await post_offer(http, f"{balancer}/whip/live", OFFER, token="key-1")
    assert len(at_balancer) == 1 and len(at_node) == 1
    request, body = at_node[0]
    assert request.method == "POST" and body == OFFER
    assert request.headers["Authorization"] == "Bearer key-1"
    assert request.headers["Content-Type"] == "application/sdp"
    assert request.query["via"] == "lb"
    assert answer.url == f"{node}/whip/live?via=lb" and answer.sdp == "answer-sdp"
    assert answer.resource_url == f"{node}/whip/live/session-1", "the session lives on the server that made it"


async def test_a_relative_location_is_resolved_against_the_url_that_answered():
    async def handler(request: web.Request) -> web.Response:
        if request.path == "/whip/live":
            return web.Response(status=307, headers={"Location": "../node-2/whip/live"})
        return web.Response(status=201, text="answer-sdp", headers={"Location": "live/s-2"})

    async with serving(handler) as (base, seen), aiohttp.ClientSession() as http:
        answer = await post_offer(http, f"{base}/whip/live", OFFER)
    assert [request.path for request, _ in seen] == ["/whip/live", "/node-2/whip/live"]
    assert "Authorization" not in seen[1][0].headers, "no token given, none sent"
    assert answer.resource_url == f"{base}/node-2/whip/live/s-2"


async def test_a_redirect_loop_ends_after_a_bounded_number_of_requests():
    async with serving(redirect(307, "/whip/live")) as (base, seen), aiohttp.ClientSession() as http:
        with pytest.raises(CamError, match=f"more than {MAX_REDIRECTS} redirects"):
            await post_offer(http, f"{base}/whip/live", OFFER, token="key-1")
    assert len(seen) == MAX_REDIRECTS + 1


@pytest.mark.parametrize(
    ("location", "said"),
    [("", "without a Location"), ("ftp://127.0.0.1/x", "only http and https")],
)
async def test_a_redirect_that_cannot_be_followed_is_one_clear_error(location, said):
    async with serving(redirect(307, location)) as (base, _), aiohttp.ClientSession() as http:
        with pytest.raises(CamError, match=said):
            await post_offer(http, f"{base}/whip/live", OFFER)


async def test_other_redirects_are_not_followed_they_could_turn_the_post_into_a_get():
    async with serving(redirect(302, "/elsewhere")) as (base, seen), aiohttp.ClientSession() as http:
        with pytest.raises(ServerRefusal) as refused:
            await post_offer(http, f"{base}/whip/live", OFFER)
    assert refused.value.status == 302 and len(seen) == 1


@pytest.mark.parametrize(
    ("status", "code", "said"),
    [
        (401, "unauthorized", "--token"),
        (402, "payment_required", "no tokens left"),
        (404, "face_not_found", "--face PHOTO"),
        (503, "too_many_sessions", "try again in 5 s"),
    ],
)
async def test_a_refusal_after_a_redirect_is_said_for_the_user(status, code, said):
    async def refuse(request: web.Request) -> web.Response:
        body = {"error": {"code": code, "message": "as the server says it"}}
        return web.json_response(body, status=status, headers={"Retry-After": "5"})

    async with serving(refuse) as (node, _), serving(redirect(307, f"{node}/whip/live")) as (balancer, _):
        async with aiohttp.ClientSession() as http:
            with pytest.raises(ServerRefusal) as refused:
                await post_offer(http, f"{balancer}/whip/live", OFFER, token="key-1")
    assert refused.value.status == status and refused.value.code == code
    assert said in str(refused.value)


async def test_delete_sends_the_token_to_the_session_url():
    async def ok(request: web.Request) -> web.Response:
        return web.json_response({})

    async with serving(ok) as (base, seen), aiohttp.ClientSession() as http:
        assert await delete_resource(http, f"{base}/whip/live/s-1", token="key-1") == 200
    request, _ = seen[0]
    assert request.method == "DELETE" and request.path == "/whip/live/s-1"
    assert request.headers["Authorization"] == "Bearer key-1"


def test_a_token_sent_over_https_is_not_followed_to_plain_http():
    from client.cam.whip_http import _redirect_target

    with pytest.raises(CamError, match="unencrypted"):
        _redirect_target("https://ingest.example/whip/live", "http://node-2.example/whip/live", "key-1")
    assert (
        _redirect_target("https://a.example/whip/x", "https://b.example/whip/x", "key-1") == "https://b.example/whip/x"
    )
    assert _redirect_target("https://a.example/whip/x", "http://b.example/whip/x", None) == "http://b.example/whip/x"
