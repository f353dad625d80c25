"""View tokens through the real server: /api/streams, and the helper a WHEP or watch route calls.

The store behind the server is in memory and a real redis-server (fixture `store_url`). A route
added to the real app for these tests stands for the WHEP route: it answers what
`view_token_stream` decided.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from client.facefuse_client import FacefuseClient
from quota.view_tokens import MAX_VIEW_TOKENS_PER_ACCOUNT
from signaling.app import create_app
from signaling.auth import view_token_stream
from signaling.settings import ServerSettings
from support.app_on_loopback import app_on_loopback
from support.metering import ADMIN, create_account
from support.server import loopback_settings


async def _who_plays(request: web.Request) -> web.Response:
    account_id, stream, _token_id = await view_token_stream(request)
    return web.json_response({"account": account_id, "stream": stream})


@contextlib.asynccontextmanager
async def server_with_player_route(settings: ServerSettings) -> AsyncIterator[str]:
    """The real app on 127.0.0.1 with GET /test-play/{stream} answering view_token_stream's decision."""
    app = create_app(settings)
    app.router.add_get("/test-play/{stream}", _who_plays)
    async with app_on_loopback(app) as url:
        yield url


class Caller:
    """Raw HTTP with one credential: statuses, headers and bodies as they are."""

    def __init__(self, base: str, http: aiohttp.ClientSession, token: str | None = None) -> None:
        self.base, self.http = base, http
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def call(self, method: str, path: str, **kwargs) -> tuple[int, Any, Mapping[str, str]]:
        async with self.http.request(method, self.base + path, headers=self.headers, **kwargs) as response:
            return response.status, await response.json(content_type=None), response.headers


@pytest.fixture
async def metered(store_url) -> AsyncIterator[tuple[Caller, Caller, Caller]]:
    """(alice, bob, anonymous) against a server with accounts, on each store."""
    settings = loopback_settings(quota={"admin_key": ADMIN, "redis_url": store_url})
    async with server_with_player_route(settings) as base, aiohttp.ClientSession() as http:
        async with FacefuseClient(base, api_key=ADMIN) as admin:
            alice_key = await create_account(admin, "alice", 10)
            bob_key = await create_account(admin, "bob", 10)
        yield Caller(base, http, alice_key), Caller(base, http, bob_key), Caller(base, http)


def assert_error(status: int, body: dict, want_status: int, want_code: str) -> None:
    assert (status, body["error"]["code"]) == (want_status, want_code), body
    assert body["error"]["message"]


async def test_create_list_and_revoke(metered):
    alice, _, _ = metered
    status, created, headers = await alice.call("POST", "/api/streams/main-cam/view-tokens")
    assert status == 201, created
    secret, token_id = created["token"], created["id"]
    assert secret.startswith("fv_") and len(secret) > 30
    assert created["stream"] == "main-cam" and created["created_at"] > 0
    assert created["watch_url"] == f"/watch/main-cam#token={secret}"
    assert created["whep_url"] == "/whep/main-cam"
    assert headers["Location"] == f"/api/streams/main-cam/view-tokens/{token_id}"
    await alice.call("POST", "/api/streams/main-cam/view-tokens")
    await alice.call("POST", "/api/streams/backstage/view-tokens")

    status, listed, _ = await alice.call("GET", "/api/streams/main-cam/view-tokens")
    assert status == 200 and [t["id"] for t in listed["view_tokens"]][0] == token_id
    assert len(listed["view_tokens"]) == 2 and set(listed["view_tokens"][0]) == {"id", "stream", "created_at"}
    assert secret not in str(listed)
    status, streams, _ = await alice.call("GET", "/api/streams")
    idle = {"live": False, "session_id": None, "node_id": None, "viewers": []}
    assert streams == {
        "streams": [
            {"stream": "backstage", **idle, "view_tokens": 1},
            {"stream": "main-cam", **idle, "view_tokens": 2},
        ]
    }

    status, deleted, _ = await alice.call("DELETE", f"/api/streams/main-cam/view-tokens/{token_id}")
    assert (status, deleted) == (200, {"id": token_id, "deleted": True, "viewers_closed": 0})
    assert_error(
        *(await alice.call("DELETE", f"/api/streams/main-cam/view-tokens/{token_id}"))[:2], 404, "view_token_not_found"
    )
    _, listed, _ = await alice.call("GET", "/api/streams/main-cam/view-tokens")
    assert token_id not in str(listed) and len(listed["view_tokens"]) == 1


async def test_another_accounts_tokens_are_neither_listed_nor_revocable(metered):
    alice, bob, _ = metered
    _, created, _ = await alice.call("POST", "/api/streams/cam/view-tokens")
    assert (await bob.call("GET", "/api/streams/cam/view-tokens"))[1] == {"view_tokens": []}
    assert (await bob.call("GET", "/api/streams"))[1] == {"streams": []}
    status, body, _ = await bob.call("DELETE", f"/api/streams/cam/view-tokens/{created['id']}")
    assert_error(status, body, 404, "view_token_not_found")
    status, body, _ = await alice.call("DELETE", f"/api/streams/other/view-tokens/{created['id']}")
    assert_error(status, body, 404, "view_token_not_found")  # a token is revoked under its own stream
    assert len((await alice.call("GET", "/api/streams/cam/view-tokens"))[1]["view_tokens"]) == 1


async def test_the_endpoints_need_the_accounts_api_key(metered):
    _, _, anonymous = metered
    for method, path in (
        ("POST", "/api/streams/cam/view-tokens"),
        ("GET", "/api/streams/cam/view-tokens"),
        ("DELETE", "/api/streams/cam/view-tokens/vt_0"),
        ("GET", "/api/streams"),
    ):
        status, body, headers = await anonymous.call(method, path)
        assert_error(status, body, 401, "unauthorized")
        assert headers["WWW-Authenticate"] == "Bearer"


async def test_a_view_token_is_401_everywhere_in_the_api(metered):
    alice, _, _ = metered
    _, created, _ = await alice.call("POST", "/api/streams/cam/view-tokens")
    viewer = Caller(alice.base, alice.http, created["token"])
    for method, path, kwargs in (
        ("GET", "/api/account", {}),
        ("POST", "/api/faces", {"data": b"\xff\xd8 not read", "headers": {"Content-Type": "image/jpeg"}}),
        ("POST", "/api/offer", {"json": {"sdp": "v=0", "type": "offer"}}),
        ("GET", "/api/sessions", {}),
        ("GET", "/api/streams", {}),
        ("POST", "/api/streams/cam/view-tokens", {}),  # a view token cannot mint more
        ("DELETE", f"/api/streams/cam/view-tokens/{created['id']}", {}),
    ):
        async with viewer.http.request(
            method, viewer.base + path, **{**kwargs, "headers": {**viewer.headers, **kwargs.get("headers", {})}}
        ) as response:
            body = await response.json(content_type=None)
        assert_error(response.status, body, 401, "unauthorized")
        assert "view token" in body["error"]["message"], (path, body)
    assert len((await alice.call("GET", "/api/streams/cam/view-tokens"))[1]["view_tokens"]) == 1


async def test_a_view_token_plays_only_its_stream_until_revoked(metered):
    alice, bob, anonymous = metered
    _, created, _ = await alice.call("POST", "/api/streams/cam/view-tokens")
    secret = created["token"]
    in_header = Caller(alice.base, alice.http, secret)
    expected = {"account": "alice", "stream": "cam"}
    assert (await in_header.call("GET", "/test-play/cam"))[:2] == (200, expected)
    assert (await anonymous.call("GET", f"/test-play/cam?token={secret}"))[:2] == (200, expected)

    for caller, path in ((in_header, "/test-play/other"), (anonymous, f"/test-play/other?token={secret}")):
        status, body, _ = await caller.call("GET", path)
        assert_error(status, body, 401, "unauthorized")  # another stream
    for path in ("/test-play/cam", "/test-play/cam?token=fv_unknown", "/test-play/cam?token=nonsense"):
        assert_error(*(await anonymous.call("GET", path))[:2], 401, "unauthorized")

    # the account's API key plays its own streams, from the header only
    assert (await alice.call("GET", "/test-play/cam"))[:2] == (200, expected)
    assert (await bob.call("GET", "/test-play/cam"))[:2] == (200, {"account": "bob", "stream": "cam"})
    alice_key = alice.headers["Authorization"].removeprefix("Bearer ")
    assert_error(*(await anonymous.call("GET", f"/test-play/cam?token={alice_key}"))[:2], 401, "unauthorized")

    await alice.call("DELETE", f"/api/streams/cam/view-tokens/{created['id']}")
    assert_error(*(await in_header.call("GET", "/test-play/cam"))[:2], 401, "unauthorized")
    assert_error(*(await anonymous.call("GET", f"/test-play/cam?token={secret}"))[:2], 401, "unauthorized")


async def test_stream_names_are_checked(metered):
    alice, _, _ = metered
    for name in ("a" * 65, "dot.ted", "with%20space", "caf%C3%A9"):
        for method in ("POST", "GET"):
            status, body, _ = await alice.call(method, f"/api/streams/{name}/view-tokens")
            assert_error(status, body, 400, "invalid_stream_name")
    assert (await alice.call("POST", f"/api/streams/{'A-z_9' * 12}abcd/view-tokens"))[0] == 201


async def test_an_account_holds_a_bounded_number_of_view_tokens(metered):
    alice, bob, _ = metered
    for n in range(MAX_VIEW_TOKENS_PER_ACCOUNT):
        assert (await alice.call("POST", f"/api/streams/cam{n % 3}/view-tokens"))[0] == 201
    status, body, _ = await alice.call("POST", "/api/streams/cam0/view-tokens")
    assert_error(status, body, 409, "view_token_limit")
    assert "revoke" in body["error"]["message"]
    assert (await bob.call("POST", "/api/streams/cam0/view-tokens"))[0] == 201  # per account
    _, listed, _ = await alice.call("GET", "/api/streams/cam0/view-tokens")
    await alice.call("DELETE", f"/api/streams/cam0/view-tokens/{listed['view_tokens'][0]['id']}")
    assert (await alice.call("POST", "/api/streams/cam0/view-tokens"))[0] == 201


async def test_local_mode_needs_no_key_but_checks_a_given_token():
    async with server_with_player_route(loopback_settings()) as base, aiohttp.ClientSession() as http:
        local = Caller(base, http)
        status, created, _ = await local.call("POST", "/api/streams/cam/view-tokens")
        assert status == 201
        assert (await local.call("GET", "/test-play/cam"))[:2] == (200, {"account": "local", "stream": "cam"})
        ok = await local.call("GET", f"/test-play/cam?token={created['token']}")
        assert ok[:2] == (200, {"account": "local", "stream": "cam"})
        assert_error(*(await local.call("GET", f"/test-play/other?token={created['token']}"))[:2], 401, "unauthorized")
