"""Who sent a request (signaling/client_address.py): X-Forwarded-For/-Proto believed only from a
--trusted-proxy, and a proxy's own address never the client's; local mode, GET /metrics and the
Origin check all go by that rule."""

from __future__ import annotations

import dataclasses
import ipaddress
import ssl

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from signaling.app_keys import SETTINGS
from signaling.client_address import client_address, is_local_request, known_scheme
from signaling.settings import HttpSettings, ServerSettings
from support.certificates import make_certificates
from support.server import loopback_settings, running_server

ADMIN = "admin-key-for-the-client-address-tests"
OFFER = b'{"sdp": "v=0", "type": "offer"}'  # refused for its SDP (400) once the checks let it through


def request_from(peer: str, headers: list[tuple[str, str]] = (), trusted: tuple[str, ...] = ()) -> web.Request:
    """A request whose socket peer is `peer`, on a server trusting the proxies `trusted`."""
    app = web.Application()
    app[SETTINGS] = ServerSettings(http=HttpSettings(trusted_proxies=trusted))

    class Transport:  # what aiohttp reads the peer address from
        def get_extra_info(self, name: str, default: object = None) -> object:
            return (peer, 50000) if name == "peername" else default

    return make_mocked_request("GET", "/", headers=CIMultiDict(headers), app=app, transport=Transport())


def xff(*values: str) -> list[tuple[str, str]]:
    return [("X-Forwarded-For", value) for value in values]


LOCAL_PROXY = ("127.0.0.1/32",)


@pytest.mark.parametrize(
    ("peer", "headers", "trusted", "client"),
    [
        ("203.0.113.5", [], (), "203.0.113.5"),
        ("203.0.113.5", xff("127.0.0.1"), (), "203.0.113.5"),  # anyone can write the header: ignored
        ("127.0.0.1", xff("203.0.113.5"), (), "127.0.0.1"),  # a proxy nobody declared: ignored too
        ("127.0.0.1", xff("203.0.113.5"), LOCAL_PROXY, "203.0.113.5"),
        # every hop a trusted proxy's: a proxy's address is never the client's (before: 127.0.0.1, local)
        ("127.0.0.1", xff("127.0.0.1"), LOCAL_PROXY, None),
        ("127.0.0.1", xff("10.0.0.3, 10.0.0.2"), ("127.0.0.1/32", "10.0.0.0/8"), None),
        ("127.0.0.1", [], LOCAL_PROXY, None),  # the proxy's own address is not the client's
        ("127.0.0.1", xff("10.9.9.9, 203.0.113.5"), LOCAL_PROXY, "203.0.113.5"),  # the left part is the client's
        ("127.0.0.1", xff("198.51.100.7, 10.0.0.2"), ("127.0.0.1/32", "10.0.0.0/8"), "198.51.100.7"),  # two hops
        ("127.0.0.1", xff("198.51.100.7", "10.0.0.2"), ("127.0.0.1/32", "10.0.0.0/8"), "198.51.100.7"),  # two lines
        ("127.0.0.1", xff("not-an-address"), LOCAL_PROXY, None),
        ("127.0.0.1", xff("[2001:db8::1]"), LOCAL_PROXY, "2001:db8::1"),
        ("::ffff:127.0.0.1", xff("203.0.113.5"), LOCAL_PROXY, "203.0.113.5"),  # a dual-stack socket's IPv4 peer
    ],
)
def test_the_client_address(peer, headers, trusted, client):
    address = client_address(request_from(peer, headers, trusted))
    assert address == (ipaddress.ip_address(client) if client else None)


@pytest.mark.parametrize(
    ("peer", "proto", "trusted", "scheme"),
    [
        ("127.0.0.1", None, LOCAL_PROXY, None),  # plain HTTP and nobody says: unknown
        ("127.0.0.1", "https", LOCAL_PROXY, "https"),
        ("127.0.0.1", "https", (), None),
        ("203.0.113.5", "https", LOCAL_PROXY, None),
        ("127.0.0.1", "https, http", LOCAL_PROXY, "http"),  # the nearest proxy's word
        ("127.0.0.1", "gopher", LOCAL_PROXY, None),
    ],
)
def test_the_scheme_a_trusted_proxy_says(peer, proto, trusted, scheme):
    headers = [("X-Forwarded-Proto", proto)] if proto else []
    assert known_scheme(request_from(peer, headers, trusted)) == scheme


@pytest.mark.parametrize(
    ("peer", "headers", "trusted", "local"),
    [
        ("127.0.0.1", [], (), True),
        ("::1", [], (), True),
        ("127.0.0.1", xff("203.0.113.5"), LOCAL_PROXY, False),
        ("127.0.0.1", xff("127.0.0.1"), LOCAL_PROXY, False),  # a trusted hop's address: not told from the proxy
        ("127.0.0.1", [], LOCAL_PROXY, False),
        # a proxy on this machine that nobody declared: it passes on someone's request, whoever's it is
        ("127.0.0.1", xff("127.0.0.1"), (), False),
        ("127.0.0.1", [("X-Real-IP", "203.0.113.5")], (), False),
        ("127.0.0.1", [("Forwarded", "for=203.0.113.5")], (), False),
        ("192.0.2.7", [], (), False),
    ],
)
def test_a_local_request(peer, headers, trusted, local):
    assert is_local_request(request_from(peer, headers, trusted)) is local


def test_trusted_proxy_takes_networks_only():
    with pytest.raises(ValueError, match="--trusted-proxy"):
        HttpSettings(trusted_proxies=("proxy.example",))


def with_http(keyed: bool = False, **http: object) -> ServerSettings:
    settings = loopback_settings(quota={"admin_key": ADMIN} if keyed else None)
    return dataclasses.replace(settings, http=dataclasses.replace(settings.http, **http))


async def answer(url: str, method: str, path: str, **kwargs) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as http:
        async with http.request(method, url + path, **kwargs) as response:
            return response.status, await response.json(content_type=None)


async def test_local_mode_is_not_reachable_through_a_proxy_on_this_machine():
    """The server listens on loopback, but a proxy on 127.0.0.1 passes on requests from anywhere:
    trusted or not, what it forwards from elsewhere is not this machine's."""
    async with running_server(with_http(trusted_proxies=LOCAL_PROXY)) as (url, _app):
        status, body = await answer(url, "GET", "/api/sessions", headers={"X-Forwarded-For": "203.0.113.5"})
        assert status == 403 and body["error"]["code"] == "local_only", body
        assert "203.0.113.5" in body["error"]["message"] and "admin key" in body["error"]["message"]
        status, _ = await answer(url, "GET", "/api/sessions", headers={"X-Forwarded-For": "127.0.0.1"})
        assert status == 403  # every hop the trusted proxy's own address: nobody known, so not this machine
        status, _ = await answer(url, "GET", "/api/sessions")
        assert status == 403  # from the proxy itself, for nobody named
    async with running_server(with_http()) as (url, _app):  # a proxy nobody declared
        status, body = await answer(url, "GET", "/api/sessions", headers={"X-Forwarded-For": "127.0.0.1"})
        assert status == 403 and body["error"]["code"] == "local_only", body
        status, _ = await answer(url, "GET", "/api/sessions")
        assert status == 200


async def test_metrics_go_by_the_client_behind_a_trusted_proxy():
    """Before the rule, a proxy on this machine made every scrape a loopback one."""
    settings = with_http(keyed=True, trusted_proxies=LOCAL_PROXY, metrics_allow=("10.0.0.0/8",))
    async with running_server(settings) as (url, _app):
        status, body = await answer(url, "GET", "/metrics", headers={"X-Forwarded-For": "203.0.113.5"})
        assert status == 403 and body["error"]["code"] == "forbidden", body
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/metrics", headers={"X-Forwarded-For": "10.1.2.3"}) as response:
                assert response.status == 200
    async with running_server(with_http(keyed=True)) as (url, _app):  # no proxy trusted: the socket's peer
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/metrics", headers={"X-Forwarded-For": "203.0.113.5"}) as response:
                assert response.status == 200


async def test_the_own_origin_has_the_scheme_when_it_is_known(tmp_path):
    """Over plain HTTP with no proxy trusted, a page of this Host over http or https is the
    server's own (a proxy may end TLS unsaid); once the scheme is known, only that one."""
    key = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}

    async def origin_status(url: str, origin: str, **headers: str) -> int:
        status, _ = await answer(url, "POST", "/api/offer", data=OFFER, headers={**headers, "Origin": origin})
        return status

    async with running_server(with_http(keyed=True)) as (url, _app):
        host = url.split("://", 1)[1]
        assert await origin_status(url, f"http://{host}", **key) != 403
        assert await origin_status(url, f"https://{host}", **key) != 403
    async with running_server(with_http(keyed=True, trusted_proxies=LOCAL_PROXY)) as (url, _app):
        host = url.split("://", 1)[1]
        forwarded = {"X-Forwarded-For": "203.0.113.5", "X-Forwarded-Proto": "https", **key}
        assert await origin_status(url, f"https://{host}", **forwarded) != 403
        assert await origin_status(url, f"http://{host}", **forwarded) == 403
    made = make_certificates(tmp_path)
    async with running_server(with_http(keyed=True, tls_cert=made.cert_file, tls_key=made.key_file)) as (url, _app):
        host = url.split("://", 1)[1]
        ssl_context = ssl.create_default_context(cafile=str(made.ca_file))
        async with aiohttp.ClientSession() as http:
            for origin, refused in ((f"https://{host}", False), (f"http://{host}", True)):
                headers = {**key, "Origin": origin}
                async with http.post(f"{url}/api/offer", data=OFFER, headers=headers, ssl=ssl_context) as response:
                    assert (response.status == 403) is refused, (origin, response.status)
